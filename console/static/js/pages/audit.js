// Audit: the registry's recent call outcomes, newest first. Records hold argument keys
// only (credential-looking ones masked), never values or results.

import { getJson } from "../api.js";
import { clear, errorText, h, stateBadge, table, when } from "../dom.js";

function row(record) {
  return h(
    "tr",
    {},
    h("td", {}, when(Math.round(record.at * 1000))),
    h("td", {}, record.name || ""),
    h("td", {}, record.principal),
    h("td", {}, stateBadge(record.state)),
    h("td", {}, record.errorCode || ""),
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
      table(["time", "tool", "principal", "outcome", "error", "ms", "argument keys", "request"], records.map(row), { id: "audit" }),
    );
  };
  await refresh();
  const timer = setInterval(() => refresh().catch((e) => say(errorText(e), true)), 3000);
  return () => clearInterval(timer);
}
