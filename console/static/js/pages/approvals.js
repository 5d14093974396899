// Approvals: high-risk calls waiting for an operator. Each decision is bound to that one
// call (its fingerprint), carries a reason, and a call nobody decides in time is denied.

import { ApiError, enc, getJson, postJson } from "../api.js";
import { clear, errorText, h, shortJson, stateBadge, table, when } from "../dom.js";

function decide(approval, decision, reason, say, refresh) {
  return async () => {
    try {
      await postJson(`/api/approvals/${enc(approval.id)}/${decision}`, { reason: reason.value });
      say(`${approval.tool}: ${decision === "approve" ? "approved" : "denied"}`);
    } catch (error) {
      const gone = error instanceof ApiError && error.status === 409;
      say(gone ? `${approval.tool} is no longer pending (decided or expired)` : errorText(error), true);
    }
    await refresh();
  };
}

function pendingRow(approval, say, refresh) {
  const reason = h("input", { type: "text", className: "reason", placeholder: "reason", maxlength: 500, "aria-label": "reason" });
  const approve = h("button", { type: "button", className: "approve" }, "Approve");
  const deny = h("button", { type: "button", className: "deny danger" }, "Deny");
  approve.addEventListener("click", decide(approval, "approve", reason, say, refresh));
  deny.addEventListener("click", decide(approval, "deny", reason, say, refresh));
  return h(
    "tr",
    { dataset: { approval: approval.id, tool: approval.tool } },
    h("td", {}, h("strong", {}, approval.tool), " ", h("span", { className: "muted" }, approval.version || "")),
    h("td", {}, stateBadge(approval.risk)),
    h("td", {}, approval.caller ? shortJson(approval.caller, 80).replace(/^"|"$/g, "") : ""),
    h("td", {}, h("code", { className: "arguments" }, shortJson(approval.arguments, 300))),
    h("td", {}, h("code", { title: approval.fingerprint }, String(approval.fingerprint || "").slice(0, 12))),
    h("td", {}, when(approval.requested_at)),
    h("td", {}, when(approval.expires_at)),
    h("td", { className: "decide" }, reason, approve, deny),
  );
}

function decidedRow(approval) {
  return h(
    "tr",
    { dataset: { approval: approval.id } },
    h("td", {}, approval.tool),
    h("td", {}, stateBadge(approval.state)),
    h("td", {}, approval.reason || ""),
    h("td", {}, when(approval.decided_at)),
    h("td", {}, h("code", {}, shortJson(approval.arguments, 200))),
  );
}

export async function render(root, { say }) {
  root.append(
    h("h1", {}, "Approvals"),
    h("p", { className: "muted" }, "An approval lets exactly that call run once; other arguments need their own. No decision before it expires means denied."),
  );
  const pending = h("tbody");
  const decided = h("tbody");
  root.append(
    h("h2", {}, "Waiting"),
    h("table", { id: "approvals" }, h("thead", {}, h("tr", {}, ["tool", "risk", "caller", "arguments", "fingerprint", "requested", "expires", "decision"].map((t) => h("th", {}, t)))), pending),
    h("h2", {}, "Decided"),
    table(["tool", "state", "reason", "decided", "arguments"], [], { id: "decided" }),
  );
  const decidedBody = root.querySelector("#decided tbody");
  const focused = () => document.activeElement && document.activeElement.classList.contains("reason");
  const refresh = async () => {
    const all = (await getJson("/api/approvals")).approvals;
    const waiting = all.filter((a) => a.state === "pending");
    clear(pending).append(...waiting.map((a) => pendingRow(a, say, refresh)));
    if (waiting.length === 0) pending.append(h("tr", { className: "empty" }, h("td", { colspan: 8 }, "Nothing is waiting.")));
    clear(decidedBody).append(...all.filter((a) => a.state !== "pending").map(decidedRow));
  };
  await refresh();
  // Never redraw under the operator's typing: a reason being written would be lost.
  const timer = setInterval(() => {
    if (!focused()) refresh().catch((e) => say(errorText(e), true));
  }, 1500);
  return () => clearInterval(timer);
}
