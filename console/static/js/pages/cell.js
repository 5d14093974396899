// Cell: the running skill's cameras (polled JPEGs through the console server), joint
// state, each tool's readiness and busy state, and the invocations in flight.

import { enc, getBlob, getJson } from "../api.js";
import { clear, errorText, h, stateBadge, table } from "../dom.js";
import { invocationRow } from "../invocations.js";
import { chooseSkill } from "../skill_pick.js";

const FRAME_PAUSE_MS = 120;

function camera(skill, source, alive) {
  const img = h("img", { className: "camera", alt: `${source} camera`, dataset: { source } });
  const caption = h("figcaption", {}, source);
  let previous = null;
  async function next() {
    if (!alive()) return;
    try {
      const blob = await getBlob(`api/cell/${enc(skill)}/frame/${enc(source)}`);
      const url = URL.createObjectURL(blob);
      img.src = url;
      await img.decode().catch(() => {});
      if (previous) URL.revokeObjectURL(previous);
      previous = url;
      caption.textContent = source;
      caption.classList.remove("error");
    } catch (error) {
      caption.textContent = `${source}: ${errorText(error)}`;
      caption.classList.add("error");
    }
    setTimeout(next, FRAME_PAUSE_MS);
  }
  next();
  return h("figure", { className: "camera-view" }, img, caption);
}

function jointRows(state) {
  const joints = state.joint_state || {};
  const names = joints.names || joints.name || [];
  const positions = joints.positions || joints.position || [];
  const velocities = joints.velocities || joints.velocity || [];
  return names.map((name, i) =>
    h(
      "tr",
      {},
      h("td", {}, name),
      h("td", { className: "num" }, Number(positions[i] ?? NaN).toFixed(4)),
      h("td", { className: "num" }, velocities.length ? Number(velocities[i]).toFixed(4) : ""),
    ),
  );
}

function toolRows(tools) {
  return tools.map((tool) => {
    const context = tool.context || {};
    const endpoint = context.endpoint_status || {};
    const busy = (context.active_invocations || 0) > 0 || endpoint.state === "busy";
    return h(
      "tr",
      { dataset: { tool: tool.tool_id } },
      h("td", {}, tool.tool_id),
      h("td", {}, tool.semantics),
      h("td", {}, stateBadge(context.ready ? "ready" : "not-ready")),
      h("td", {}, stateBadge(busy ? "busy" : "idle")),
      h("td", {}, context.binding_error || ""),
    );
  });
}

function poller(alive, period, work) {
  async function loop() {
    if (!alive()) return;
    await work();
    setTimeout(loop, period);
  }
  loop();
}

export async function render(root, { say }) {
  let live = true;
  const alive = () => live && root.isConnected;
  root.append(h("h1", {}, "Cell"));
  const body = h("div");
  const skill = await chooseSkill(root, () => location.reload());
  root.append(body);
  if (!skill) return () => {};
  const sources = (await getJson(`api/cell/${enc(skill)}/sources`)).sources;
  const cameras = h("div", { className: "cameras", id: "cameras" });
  for (const source of sources) cameras.append(camera(skill, source.source, alive));
  const joints = h("tbody");
  const tools = h("tbody");
  body.append(
    cameras,
    h(
      "div",
      { className: "columns" },
      h(
        "section",
        {},
        h("h2", {}, "Joint state"),
        h("table", { id: "joints" }, h("thead", {}, h("tr", {}, h("th", {}, "joint"), h("th", {}, "position"), h("th", {}, "velocity"))), joints),
      ),
      h(
        "section",
        {},
        h("h2", {}, "Tools"),
        h("table", { id: "tool-status" }, h("thead", {}, h("tr", {}, ["tool", "kind", "ready", "busy", "binding"].map((t) => h("th", {}, t)))), tools),
      ),
    ),
    h("h2", {}, "Invocations"),
    table(["tool", "by", "phase", "progress", "outcome", ""], [], { id: "invocations" }),
  );
  const invocationBody = body.querySelector("#invocations tbody");
  poller(alive, 500, async () => {
    try {
      const rows = jointRows(await getJson(`api/cell/${enc(skill)}/state`));
      clear(joints).append(...rows);
    } catch (error) {
      clear(joints).append(h("tr", {}, h("td", { colspan: 3 }, errorText(error))));
    }
  });
  poller(alive, 2000, async () => {
    try {
      const rows = toolRows((await getJson(`api/cell/${enc(skill)}/tools`)).tools);
      clear(tools).append(...rows);
    } catch (error) {
      say(errorText(error), true);
    }
  });
  poller(alive, 1000, async () => {
    try {
      const rows = (await getJson(`api/cell/${enc(skill)}/invocations`)).invocations;
      clear(invocationBody).append(...rows.map((row) => invocationRow(skill, row, say)));
    } catch (error) {
      say(errorText(error), true);
    }
  });
  return () => {
    live = false;
  };
}
