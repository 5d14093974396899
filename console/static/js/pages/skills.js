// Skills: installed skills, versions, runtime state with its reason, start and stop with
// the CLI's guards (a stop refused while work is active asks before forcing), recent logs.

import { ApiError, enc, getJson, postJson } from "../api.js";
import { clear, errorText, h, stateBadge, table, when } from "../dom.js";

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
  const startButton = h("button", { type: "button", className: "start", disabled: live }, "Start");
  startButton.addEventListener("click", () =>
    run(startButton, async () => {
      say(`starting ${skill.name} (${profile.value || "default"})… the dataflow comes up and every required tool gets ready`);
      startButton.textContent = "Starting…";
      const body = profile.value ? { profile: profile.value } : {};
      await postJson(`api/skills/${enc(skill.name)}/start`, body);
      say(`${skill.name} running`);
      await refresh();
    }),
  );
  const stopButton = h("button", { type: "button", className: "stop danger", disabled: !live }, "Stop");
  stopButton.addEventListener("click", () => run(stopButton, () => stop(skill.name, say, refresh)));
  const logsButton = h("button", { type: "button", className: "logs" }, "Logs");
  logsButton.addEventListener("click", () => run(logsButton, () => showLogs(skill.name)));
  return [profile, startButton, stopButton, logsButton];
}

export async function render(root, { say }) {
  root.append(h("h1", {}, "Skills"));
  const rows = h("tbody");
  const logs = h("pre", { id: "logs", className: "logs" });
  const logsTitle = h("h2", { hidden: true }, "Logs");
  root.append(
    h("table", { id: "skills" }, h("thead", {}, h("tr", {}, ["skill", "version", "state", "since", "reason", ""].map((t) => h("th", {}, t)))), rows),
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
    clear(rows).append(
      ...skills.map((skill) =>
        h(
          "tr",
          { dataset: { skill: skill.name } },
          h("td", {}, skill.name),
          h("td", {}, skill.version || ""),
          h("td", { className: "runtime-state" }, stateBadge(skill.runtime ? skill.runtime.state : "not started")),
          h("td", {}, skill.runtime ? when(Date.parse(skill.runtime.updated_at)) : ""),
          h("td", { className: "reason" }, reason(skill)),
          h("td", { className: "actions" }, actions(skill, say, refresh, showLogs)),
        ),
      ),
    );
    if (skills.length === 0) {
      rows.append(h("tr", {}, h("td", { colspan: 6 }, "No skill installed: doraforge skill install <bundle>")));
    }
  };
  await refresh();
  const timer = setInterval(() => refresh().catch((e) => say(errorText(e), true)), 5000);
  return () => clearInterval(timer);
}
