// Building elements without innerHTML: text is always text, never markup.

export function h(tag, attrs = {}, ...children) {
  const element = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on") && typeof value === "function") {
      element.addEventListener(key.slice(2), value);
    } else if (key === "className") {
      element.className = value;
    } else if (key === "dataset") {
      Object.assign(element.dataset, value);
    } else if (value === true) {
      element.setAttribute(key, "");
    } else {
      element.setAttribute(key, String(value));
    }
  }
  append(element, children);
  return element;
}

export function append(element, children) {
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    element.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return element;
}

export function clear(element) {
  element.replaceChildren();
  return element;
}

export function table(headings, rows, attrs = {}) {
  return h(
    "table",
    attrs,
    h("thead", {}, h("tr", {}, headings.map((text) => h("th", {}, text)))),
    h("tbody", {}, rows),
  );
}

export function when(ms) {
  if (ms === null || ms === undefined) return "";
  const date = typeof ms === "string" && !/^\d+$/.test(ms) ? new Date(ms) : new Date(Number(ms));
  if (Number.isNaN(date.getTime())) return String(ms);
  return date.toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC");
}

export function shortJson(value, limit = 400) {
  const text = JSON.stringify(value);
  if (text === undefined) return "";
  return text.length > limit ? `${text.slice(0, limit)}…` : text;
}

export function errorText(error) {
  if (error && error.code) return `${error.code}: ${error.message}`;
  return String((error && error.message) || error);
}

export function stateBadge(state) {
  return h("span", { className: `state state-${String(state || "none")}` }, state || "—");
}
