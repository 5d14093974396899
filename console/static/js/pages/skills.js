// Skills: installed skills, versions, runtime state with its reason and its Gateway's
// address, start (profile and port, the port checked beside its field) and stop with the
// CLI's guards (a stop refused while work is active asks before forcing), recent logs.

import { ApiError, enc, getJson, postJson } from "../api.js";
import { clear, errorText, h, stateBadge, when } from "../dom.js";
import { markField } from "../schema_form.js";

// The port field's value: null (the manifest's port), "auto", or a TCP port; a message
// for anything else.
function readPort(input) {
  const text = input.value.trim();
  if (text === "") return { port: null };
  if (text === "auto") return { port: "auto" };
  const port = Number(text);
  if (!/^\d+$/.test(text) || port < 1 || port > 65535) {
    return { message: "a TCP port (1-65535), auto, or empty for the manifest's" };
  }
  return { port };
}

function gatewayCell(skill) {
  const runtime = skill.runtime;
  if (!runtime || !["starting", "running", "stopping"].includes(runtime.state)) return "";
  return h("code", { className: "gateway-url copyable" }, runtime.gateway_url);
}

function reason(skill) {
  const runtime = skill.runtime;
  if (skill.error) return skill.error.code;
  if (skill.runtime_error) return errorText(skill.runtime_error);
  if (runtime && runtime.error) return `${runtime.error.code}: ${runtime.error.message}`;
  return "";
}

function blockersText(error) {
  const blockers = (error.details && error.details.blockers) || [];
  return blockers.map((b) => (typeof b === "string" ? b : JSON.stringify(b))).join("\n");
}

async function stop(name, say, refresh) {
  try {
    await postJson(`api/skills/${enc(name)}/stop`, {});
  } catch (error) {
    if (!(error instanceof ApiError) || error.code !== "SKILL_RUNTIME_IN_USE") throw error;
    const question =
      `${name} is in use:\n${blockersText(error)}\n\n` +
      "Stop anyway? Cancel/stop is requested for every invocation and the stop is audited.";
    if (!window.confirm(question)) {
      say(`stop of ${name} not forced`);
      return;
    }
    await postJson(`api/skills/${enc(name)}/stop`, { force: true });
  }
  say(`${name} stopped`);
  await refresh();
}

function actions(skill, say, refresh, showLogs) {
  const state = skill.runtime ? skill.runtime.state : "stopped";
  const live = ["starting", "running", "stopping"].includes(state);
  const run = async (button, work) => {
    button.disabled = true;
    try {
      await work();
    } catch (error) {
      say(errorText(error), true);
      await refresh();
    } finally {
      button.disabled = false;
    }
  };
  const profiles = skill.profiles || [];
  const last = skill.runtime ? skill.runtime.profile : null;
  const profile = h(
    "select",
    { className: "profile", "aria-label": "profile", hidden: profiles.length < 2, disabled: live },
    profiles.map((p) => h("option", { value: p, selected: p === (last || (profiles.includes("sim") ? "sim" : profiles[0])) }, p)),
  );
  const portId = `port-${skill.name}`;
  const portInput = h("input", {
    id: portId,
    className: "port",
    name: "port",
    placeholder: "port",
    inputmode: "numeric",
    "aria-label": "Gateway port",
    "aria-describedby": `${portId}-error`,
    title: "the Gateway's port: a number, auto for a free one, empty for the manifest's",
    disabled: live,
  });
  const portField = h(
    "span",
    { className: "field inline-field" },
    portInput,
    h("span", { id: `${portId}-error`, className: "field-error", role: "alert" }),
  );
  portInput.addEventListener("input", () => markField(portInput, null));
  const startButton = h("button", { type: "button", className: "start", disabled: live }, "Start");
  startButton.addEventListener("click", () => {
    const chosen = readPort(portInput);
    markField(portInput, chosen.message || null);
    if (chosen.message) {
      portInput.focus();
      return;
    }
    run(startButton, async () => {
      say(`starting ${skill.name} (${profile.value || "default"})… the dataflow comes up and every required tool gets ready`);
      startButton.textContent = "Starting…";
      const body = profile.value ? { profile: profile.value } : {};
      if (chosen.port !== null) body.port = chosen.port;
      const started = await postJson(`api/skills/${enc(skill.name)}/start`, body);
      say(`${skill.name} running; its Gateway on ${started.runtime.gateway_url}`);
      await refresh();
    });
  });
  const stopButton = h("button", { type: "button", className: "stop danger", disabled: !live }, "Stop");
  stopButton.addEventListener("click", () => run(stopButton, () => stop(skill.name, say, refresh)));
  const logsButton = h("button", { type: "button", className: "logs" }, "Logs");
  logsButton.addEventListener("click", () => run(logsButton, () => showLogs(skill.name)));
  return [profile, portField, startButton, stopButton, logsButton];
}

// What the operator typed in the port fields (and the marks on them) outlives the
// page's periodic refresh, which rebuilds the rows.
function keptPorts(rows) {
  return [...rows.querySelectorAll("input.port")].map((input) => ({
    id: input.id,
    value: input.value,
    error: input.closest(".field").querySelector(".field-error").textContent,
    focused: document.activeElement === input,
  }));
}

function restorePorts(rows, kept) {
  for (const was of kept) {
    const input = rows.querySelector(`#${CSS.escape(was.id)}`);
    if (!input) continue;
    input.value = was.value;
    markField(input, was.error || null);
    if (was.focused) input.focus();
  }
}

export async function render(root, { say }) {
  root.append(h("h1", {}, "Skills"));
  const rows = h("tbody");
  const logs = h("pre", { id: "logs", className: "logs" });
  const logsTitle = h("h2", { hidden: true }, "Logs");
  root.append(
    h("table", { id: "skills" }, h("thead", {}, h("tr", {}, ["skill", "version", "state", "since", "Gateway", "reason", ""].map((t) => h("th", {}, t)))), rows),
    logsTitle,
    logs,
  );
  const showLogs = async (name) => {
    const answer = await getJson(`api/skills/${enc(name)}/logs?lines=200`);
    logsTitle.hidden = false;
    logsTitle.textContent = `Logs of ${name}`;
    logs.textContent = answer.text;
  };
  const refresh = async () => {
    const skills = (await getJson("api/skills")).skills;
    const kept = keptPorts(rows);
    clear(rows).append(
      ...skills.map((skill) =>
        h(
          "tr",
          { dataset: { skill: skill.name } },
          h("td", {}, skill.name),
          h("td", {}, skill.version || ""),
          h("td", { className: "runtime-state" }, stateBadge(skill.runtime ? skill.runtime.state : "not started")),
          h("td", {}, skill.runtime ? when(Date.parse(skill.runtime.updated_at)) : ""),
          h("td", { className: "gateway" }, gatewayCell(skill)),
          h("td", { className: "reason" }, reason(skill)),
          h("td", { className: "actions" }, actions(skill, say, refresh, showLogs)),
        ),
      ),
    );
    restorePorts(rows, kept);
    if (skills.length === 0) {
      rows.append(h("tr", {}, h("td", { colspan: 7 }, "No skill installed: doraforge skill install <bundle>")));
    }
  };
  await refresh();
  const timer = setInterval(() => refresh().catch((e) => say(errorText(e), true)), 5000);
  return () => clearInterval(timer);
}
