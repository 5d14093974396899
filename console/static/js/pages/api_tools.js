// API tools: the declarative HTTP services, read as a person would (auth by credential
// name, method and path per tool, a params table, the envelope in a sentence) and a probe
// form generated from a tool's params. Authoring stays JSON (PUT /api/api-tools/{name}).
// Delete is a soft delete: the tools leave the catalog at once, saving the bundle restores it.

import { enc, getJson, postJson, request } from "../api.js";
import { clear, errorText, h, table } from "../dom.js";
import { readForm, schemaForm } from "../schema_form.js";

const SECRET = /\{\{secret:([A-Za-z_][A-Za-z0-9_]*)\}\}/g;

function authView(bundle) {
  const headers = Object.entries(bundle.headers || {}).map(([name, value]) => {
    const secrets = [...value.matchAll(SECRET)].map((m) => m[1]);
    const shown = secrets.length ? `credential ${secrets.join(", ")}` : value;
    return h("tr", {}, h("td", {}, name), h("td", {}, shown));
  });
  const credentials = bundle.credentials || [];
  return h(
    "section",
    { className: "auth" },
    h("h3", {}, "Authentication"),
    h("p", {}, credentials.length ? `Credentials by name: ${credentials.join(", ")} (values stay on the server).` : "No credentials."),
    headers.length ? table(["header", "value"], headers) : null,
  );
}

function envelopeText(tool) {
  const response = tool.response || { type: "json" };
  const envelope = response.envelope;
  if (response.type === "text") return "Text response, passed through (capped).";
  if (!envelope) return "JSON response; the whole body is the result.";
  const parts = [];
  if (envelope.codeField) parts.push(`success when ${envelope.codeField} is one of ${JSON.stringify(envelope.success)}`);
  parts.push(envelope.payloadField ? `result is ${envelope.payloadField}` : "result is the whole body");
  if ((envelope.errorFields || []).length) parts.push(`error message from ${envelope.errorFields.join(" or ")}`);
  if (envelope.treatBodyOnNon2xx) parts.push("non-2xx bodies are parsed the same way");
  return `JSON envelope: ${parts.join("; ")}.`;
}

function paramsTable(tool) {
  const rows = (tool.params || []).map((p) =>
    h(
      "tr",
      {},
      h("td", {}, h("code", {}, p.name)),
      h("td", {}, p.in),
      h("td", {}, (p.schema && p.schema.type) || "string"),
      h("td", {}, p.required ? "yes" : ""),
      h("td", {}, p.description || ""),
    ),
  );
  return rows.length ? table(["param", "in", "type", "required", "description"], rows, { className: "params" }) : h("p", { className: "muted" }, "No params.");
}

function toolView(tool) {
  return h(
    "article",
    { className: "api-tool", dataset: { tool: tool.name } },
    h("h3", {}, h("span", { className: "method" }, tool.method || "GET"), " ", h("code", {}, tool.path), " — ", tool.name),
    h("p", {}, tool.description),
    paramsTable(tool),
    h("p", { className: "envelope" }, envelopeText(tool), ` Timeout ${tool.timeoutMs ?? 30000} ms, at most ${tool.maxResultChars ?? 10000} characters.`),
  );
}

function paramsSchema(tool) {
  const properties = {};
  const required = [];
  for (const p of tool.params || []) {
    properties[p.name] = { ...(p.schema || { type: "string" }), description: `${p.in}${p.description ? ` · ${p.description}` : ""}` };
    if (p.required) required.push(p.name);
  }
  return { type: "object", properties, required };
}

function probeView(bundle, say) {
  const select = h("select", { id: "probe-tool", "aria-label": "tool" }, bundle.tools.map((t) => h("option", { value: t.name }, t.name)));
  const fields = h("div", { id: "probe-fields" });
  const live = h("input", { type: "checkbox", id: "probe-live" });
  const result = h("pre", { id: "probe-result", className: "result" });
  const draw = () => {
    const tool = bundle.tools.find((t) => t.name === select.value);
    clear(fields).append(schemaForm(paramsSchema(tool)));
  };
  select.addEventListener("change", draw);
  draw();
  const submit = async (event) => {
    event.preventDefault();
    result.textContent = "probing…";
    try {
      const body = { tool: select.value, arguments: readForm(fields), live: live.checked };
      const report = await postJson(`/api/api-tools/${enc(bundle.name)}/probe`, body);
      result.textContent = JSON.stringify(report, null, 2);
    } catch (error) {
      result.textContent = errorText(error);
      say(errorText(error), true);
    }
  };
  return h(
    "section",
    { className: "probe" },
    h("h2", {}, "Probe"),
    h(
      "form",
      { id: "probe-form", onsubmit: submit },
      h("label", {}, "Tool ", select),
      fields,
      h("label", {}, live, " send it for real (dials the upstream under the outbound policy)"),
      h("div", { className: "toolbar" }, h("button", { type: "submit", id: "probe-run" }, "Probe")),
    ),
    result,
  );
}

function deleteButton(bundle, say) {
  const button = h("button", { type: "button", id: "api-delete", className: "danger" }, "Delete service");
  button.addEventListener("click", async () => {
    const question =
      `Delete ${bundle.name}? Its ${bundle.tools.length} tool(s) leave the catalog now and its host ` +
      "is no longer declared; saving the bundle again restores it.";
    if (!window.confirm(question)) return;
    button.disabled = true;
    try {
      await request(`/api/api-tools/${enc(bundle.name)}`, { method: "DELETE" });
      say(`${bundle.name} deleted`);
      window.location.hash = "#/api-tools";
    } catch (error) {
      say(errorText(error), true);
      button.disabled = false;
    }
  });
  return button;
}

async function detail(root, name, say) {
  const bundle = (await getJson(`/api/api-tools/${enc(name)}`)).bundle;
  root.append(
    h("p", {}, h("a", { href: "#/api-tools" }, "← all API services")),
    h("h1", {}, bundle.name, " ", h("code", {}, bundle.baseUrl)),
    bundle.description ? h("p", {}, bundle.description) : null,
    deleteButton(bundle, say),
    h("section", { id: "api-detail" }, authView(bundle), h("h2", {}, "Tools"), bundle.tools.map(toolView)),
    probeView(bundle, say),
  );
}

async function list(root) {
  let services = [];
  try {
    services = (await getJson("/api/api-tools")).services;
  } catch (error) {
    root.append(h("h1", {}, "API tools"), h("p", { className: "error" }, errorText(error)));
    return;
  }
  const rows = services.map((s) =>
    h(
      "tr",
      { dataset: { service: s.name } },
      h("td", {}, h("a", { className: "service-link", href: `#/api-tools/${enc(s.name)}` }, s.name)),
      h("td", {}, h("code", {}, s.baseUrl)),
      h("td", {}, s.tools.join(", ")),
    ),
  );
  root.append(
    h("h1", {}, "API tools"),
    rows.length
      ? table(["service", "base URL", "tools"], rows, { id: "api-services" })
      : h("p", { className: "empty" }, "No API service saved. Upload a bundle with PUT /api/api-tools/{name}."),
  );
}

export async function render(root, { args, say }) {
  if (args[0]) await detail(root, args[0], say);
  else await list(root);
  return () => {};
}
