// Tasks: the recent AgentTasks, and one task's story: verdict with each criterion's
// reason, the robot it ran on, revisions, a timeline of its tool records and captures,
// every evidence frame in capture order as a filmstrip captioned with its step ("descend",
// as the agent named it, else the tool), and the evidence bundle for download.

import { enc, getBlob, getJson } from "../api.js";
import { errorText, h, stateBadge, table, when } from "../dom.js";

function listRow(task) {
  return h(
    "tr",
    { dataset: { task: task.task_id } },
    h("td", {}, h("a", { className: "task-link", href: `#/tasks/${enc(task.task_id)}` }, task.task_id)),
    h("td", {}, stateBadge(task.state)),
    h("td", {}, task.goal),
    h("td", {}, when(task.created_at_ms)),
    h("td", {}, when(task.terminal_at_ms)),
  );
}

async function list(root) {
  const tasks = (await getJson("api/tasks?limit=100")).tasks;
  root.append(
    h("h1", {}, "Tasks"),
    tasks.length === 0
      ? h("p", { className: "empty" }, "No task yet. An agent creates one through forge_task_create.")
      : table(["task", "state", "goal", "created", "finished"], tasks.map(listRow), { id: "tasks" }),
  );
}

// The step a frame was taken around: the one named with its capture, else its record's
// (the name the agent gave, else the tool), else the task's start.
function stepOf(artifact, records) {
  const record = records.find((r) => r.record_id === artifact.record_id);
  return artifact.step || (record && (record.step || record.tool_id)) || "task start";
}

function frame(taskId, artifact, records) {
  const caption = h(
    "figcaption",
    {},
    h("strong", { className: "step" }, stepOf(artifact, records)),
    ` · ${artifact.phase} · ${artifact.source}` + (artifact.seq !== null ? ` · seq ${artifact.seq}` : ""),
  );
  if (artifact.error) {
    return h("figure", { className: "frame missing" }, h("div", { className: "no-frame" }, artifact.error.code), caption);
  }
  const img = h("img", { alt: `${artifact.phase} ${artifact.source}`, dataset: { artifact: artifact.artifact_id } });
  getBlob(`api/tasks/${enc(taskId)}/evidence/${enc(artifact.artifact_id)}`)
    .then((blob) => {
      img.src = URL.createObjectURL(blob);
    })
    .catch((error) => {
      caption.textContent = `${caption.textContent}: ${errorText(error)}`;
    });
  return h("figure", { className: "frame" }, img, caption);
}

// A task that ended before any verification (cancelled, or failed on the way) has that
// ending as its verdict; only a task still running is "not decided yet".
function unverified(task) {
  const outcome = task.outcome || {};
  if (task.state === "cancelled") {
    return { status: "cancelled", detail: `cancelled before verification (${outcome.reason || "requested"})` };
  }
  if (task.state === "failed") {
    return { status: task.state, detail: "ended before verification" };
  }
  return null;
}

function verdictView(revisions, task) {
  const last = revisions[revisions.length - 1];
  const verdict = (last && last.verdict) || unverified(task);
  if (!verdict) return h("section", { id: "verdict" }, h("h2", {}, "Verdict"), h("p", {}, "not decided yet"));
  const rows = (verdict.results || []).map((r) =>
    h("tr", {}, h("td", {}, r.criterion_id), h("td", {}, stateBadge(r.status)), h("td", { className: "reason" }, r.detail || "")),
  );
  return h(
    "section",
    { id: "verdict" },
    h("h2", {}, "Verdict ", stateBadge(verdict.status)),
    verdict.detail ? h("p", {}, verdict.detail) : null,
    rows.length ? table(["criterion", "result", "reason"], rows, { id: "criteria" }) : null,
  );
}

function timeline(described) {
  const events = [];
  for (const r of described.records) {
    events.push({ at: r.created_at_ms, text: `${r.semantics} ${r.tool_id} requested`, state: null });
    if (r.terminal_at_ms) events.push({ at: r.terminal_at_ms, text: `${r.step ? `${r.step}: ` : ""}${r.tool_id} ${r.state}`, state: r.state });
  }
  for (const a of described.evidence) {
    const at = a.received_at_ns ? Number(BigInt(a.received_at_ns) / 1000000n) : null;
    events.push({ at, text: `frame ${a.phase} ${a.source}${a.error ? ` not captured (${a.error.code})` : ""}`, state: null });
  }
  // A verification attempt carries no clock of its own: it ends the task's run.
  const judged = described.task.terminal_at_ms ?? described.task.updated_at_ms;
  for (const v of described.verifications || []) {
    const bundle = v.bundle && v.bundle.ok ? "evidence bundle valid" : "evidence bundle refused";
    events.push({ at: judged, text: `verification (${bundle})`, state: v.verdict ? v.verdict.status : null });
  }
  events.sort((x, y) => (x.at ?? 0) - (y.at ?? 0));
  const rows = events.map((e) => h("tr", {}, h("td", {}, when(e.at)), h("td", {}, e.text), h("td", {}, e.state ? stateBadge(e.state) : "")));
  return table(["time", "event", ""], rows, { id: "timeline" });
}

async function download(taskId, say) {
  const blob = await getBlob(`api/tasks/${enc(taskId)}/bundle`);
  const link = h("a", { href: URL.createObjectURL(blob), download: `${taskId}-evidence.zip` });
  document.body.append(link);
  link.click();
  link.remove();
  say(`evidence bundle of ${taskId} downloaded`);
}

function robotName(binding) {
  const robots = (binding && binding.robots) || [];
  if (robots.length) return robots.join(", ");
  return `not named by its tools (skill profile ${(binding && binding.profile) || "unknown"})`;
}

async function detail(root, taskId, say) {
  const described = await getJson(`api/tasks/${enc(taskId)}`);
  const task = described.task;
  const bundleButton = h("button", { type: "button", id: "download-bundle" }, "Download evidence bundle");
  bundleButton.addEventListener("click", () => download(taskId, say).catch((e) => say(errorText(e), true)));
  const revisions = described.revisions.map((r) =>
    h("li", {}, `#${r.ordinal} ${r.reason} · ${when(r.created_at_ms)} · `, stateBadge(r.verdict ? r.verdict.status : "open")),
  );
  root.append(
    h("p", {}, h("a", { href: "#/tasks" }, "← all tasks")),
    h("h1", {}, "Task ", h("code", { className: "copyable" }, task.task_id), " ", stateBadge(task.state)),
    h("p", {}, task.goal),
    h("p", { id: "robot" }, "robot ", h("strong", {}, robotName(described.binding))),
    h("div", { className: "toolbar" }, bundleButton),
    verdictView(described.revisions, task),
    h("h2", {}, `Evidence (${described.evidence.length} frames, in capture order)`),
    h("div", { className: "filmstrip", id: "filmstrip" }, described.evidence.map((a) => frame(taskId, a, described.records))),
    h("h2", {}, "Revisions"),
    h("ol", { id: "revisions" }, revisions),
    h("h2", {}, "Timeline"),
    timeline(described),
  );
}

export async function render(root, { args, say }) {
  if (args[0]) await detail(root, args[0], say);
  else await list(root);
  return () => {};
}
