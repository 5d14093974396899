// Audit: the registry's recent call outcomes, newest first. Records hold argument keys
// only (credential-looking ones masked), never values or results.

import { getJson } from "../api.js";
import { clear, errorText, h, stateBadge, table, when } from "../dom.js";

// An approval event (requested, approved, denied, expired, withdrawn) says who decided
// and why; a call outcome says its state and error code.
function outcome(record) {
  if (record.kind === "approval") return stateBadge(`approval ${record.event}`);
  return stateBadge(record.state);
}

function note(record) {
  if (record.kind !== "approval") return record.errorCode || "";
  return [record.reason, record.by ? `by ${record.by}` : null].filter(Boolean).join(" · ");
}

function row(record) {
  return h(
    "tr",
    {},
    h("td", {}, when(Math.round(record.at * 1000))),
    h("td", { title: record.name || "" }, record.listedName || record.name || ""),
    h("td", {}, record.principal),
    h("td", {}, outcome(record)),
    h("td", { className: "note" }, note(record)),
    h("td", { className: "num" }, record.durationMs),
    h("td", {}, (record.argumentKeys || []).join(", ")),
    h("td", {}, h("code", {}, record.requestId || "")),
  );
}

export async function render(root, { say }) {
  root.append(h("h1", {}, "Audit"));
  const holder = h("div");
  root.append(holder);
  const refresh = async () => {
    const records = (await getJson("api/audit?limit=300")).records;
    clear(holder).append(
      table(["time", "tool", "principal", "outcome", "error or reason", "ms", "argument keys", "request"], records.map(row), { id: "audit" }),
    );
  };
  await refresh();
  const timer = setInterval(() => refresh().catch((e) => say(errorText(e), true)), 3000);
  return () => clearInterval(timer);
}
