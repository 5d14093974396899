// Invocation rows shared by the Cell and Tools pages: phase, progress and a cancel (or,
// for a Session, stop) button while the invocation is not terminal.

import { enc, postJson } from "./api.js";
import { errorText, h, shortJson, stateBadge } from "./dom.js";

export const TERMINAL = new Set(["completed", "failed", "cancelled", "stopped", "unknown"]);

export function progressText(status) {
  if (!status || !status.progress) return "";
  const p = status.progress;
  if (typeof p.fraction === "number") return `${Math.round(p.fraction * 100)}% ${p.message || ""}`;
  return shortJson(p, 120);
}

export function outcomeText(status) {
  const result = status && status.result;
  if (!result) return "";
  return result.status || shortJson(result, 120);
}

export function cancelButton(skill, status, say) {
  if (!status || !status.invocation_id || TERMINAL.has(status.phase)) return null;
  const label = status.semantics === "session" ? "Stop" : "Cancel";
  const button = h("button", { type: "button", className: "cancel danger" }, label);
  button.addEventListener("click", async () => {
    button.disabled = true;
    const path = `api/cell/${enc(skill)}/invocations/${enc(status.invocation_id)}/cancel`;
    try {
      await postJson(path, {});
      say(`${label.toLowerCase()} requested for ${status.invocation_id}; waiting for the phase`);
    } catch (error) {
      button.disabled = false;
      say(errorText(error), true);
    }
  });
  return button;
}

export function invocationRow(skill, row, say) {
  const status = row.status || {};
  return h(
    "tr",
    { dataset: { invocation: row.invocation_id } },
    h("td", {}, row.tool_id),
    h("td", {}, row.by || ""),
    h("td", {}, stateBadge(status.error ? "unknown" : status.phase)),
    h("td", {}, status.error ? errorText(status.error) : progressText(status)),
    h("td", { className: "outcome" }, outcomeText(status)),
    h("td", {}, cancelButton(skill, status, say)),
  );
}
