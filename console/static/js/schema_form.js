// A form generated from a tool's JSON input schema: one field per property (enums as a
// select, numbers and integers as number inputs, booleans as checkboxes, anything nested
// as a JSON text area). Reading it back gives the arguments object; a missing required
// value or unreadable JSON marks its own field with the message beside it (the server
// validates the rest).

import { h } from "./dom.js";

function field(name, schema, required) {
  const id = `arg-${name}`;
  const label = h("label", { for: id }, name, required ? " *" : "");
  const hint = schema.description ? h("small", {}, schema.description) : null;
  let input;
  if (Array.isArray(schema.enum)) {
    input = h(
      "select",
      { id, name },
      required ? null : h("option", { value: "" }, "—"),
      schema.enum.map((v) => h("option", { value: JSON.stringify(v) }, String(v))),
    );
    input.dataset.kind = "enum";
  } else if (schema.type === "boolean") {
    input = h("input", { id, name, type: "checkbox", checked: schema.default === true });
    input.dataset.kind = "boolean";
  } else if (schema.type === "number" || schema.type === "integer") {
    input = h("input", {
      id,
      name,
      type: "number",
      step: schema.type === "integer" ? "1" : "any",
      min: schema.minimum,
      max: schema.maximum,
      value: schema.default,
    });
    input.dataset.kind = schema.type;
  } else if (schema.type === "string") {
    input = h("input", { id, name, type: "text", value: schema.default, maxlength: schema.maxLength });
    input.dataset.kind = "string";
  } else {
    const example = schema.default !== undefined ? JSON.stringify(schema.default) : "";
    input = h("textarea", { id, name, rows: 3, placeholder: "JSON" }, example);
    input.dataset.kind = "json";
  }
  input.dataset.required = required ? "1" : "";
  input.setAttribute("aria-describedby", `${id}-error`);
  const error = h("span", { id: `${id}-error`, className: "field-error", role: "alert" });
  return h("div", { className: "field" }, label, input, error, hint);
}

export function schemaForm(schema, attrs = {}) {
  const properties = (schema && schema.properties) || {};
  const required = new Set((schema && schema.required) || []);
  const fields = Object.entries(properties).map(([name, sub]) =>
    field(name, sub || {}, required.has(name)),
  );
  if (fields.length === 0) fields.push(h("p", { className: "muted" }, "This tool takes no arguments."));
  return h("div", { className: "schema-form", ...attrs }, fields);
}

function value(input) {
  const kind = input.dataset.kind;
  if (kind === "boolean") return input.checked;
  if (input.value === "") return undefined;
  if (kind === "number" || kind === "integer") return Number(input.value);
  if (kind === "enum" || kind === "json") return JSON.parse(input.value);
  return input.value;
}

// Marks ``input``'s field invalid with ``message`` beside it, or clears it (null).
export function markField(input, message) {
  const field = input.closest(".field");
  const error = field && field.querySelector(".field-error");
  if (field) field.classList.toggle("invalid", Boolean(message));
  if (message) input.setAttribute("aria-invalid", "true");
  else input.removeAttribute("aria-invalid");
  if (error) error.textContent = message || "";
}

export class FormInvalid extends Error {
  constructor(problems) {
    super(`${problems.length} field${problems.length === 1 ? "" : "s"} to fix: ${problems.join("; ")}`);
    this.problems = problems;
  }
}

function problem(input) {
  let read;
  try {
    read = value(input);
  } catch {
    return { message: "not valid JSON" };
  }
  if (read === undefined && input.dataset.required) return { message: "required" };
  return { read };
}

// The arguments object; throws FormInvalid after marking every field that is wrong (the
// first one focused), and clears the marks of the fields that are right.
export function readForm(container) {
  const args = {};
  const problems = [];
  let first = null;
  for (const input of container.querySelectorAll("[data-kind]")) {
    const found = problem(input);
    markField(input, found.message || null);
    if (found.message) {
      problems.push(`${input.name}: ${found.message}`);
      first = first || input;
    } else if (found.read !== undefined) {
      args[input.name] = found.read;
    }
  }
  if (first) {
    first.focus();
    throw new FormInvalid(problems);
  }
  return args;
}
