// Tools: the running skill's catalog with live context; a tool's form is generated from
// its input schema. A Query answers at once; an Action or Session is admitted and its
// phase and progress are read until terminal, with cancel (or stop) meanwhile.

import { enc, getJson, postJson } from "../api.js";
import { clear, errorText, h, stateBadge } from "../dom.js";
import { cancelButton, outcomeText, progressText, TERMINAL } from "../invocations.js";
import { FormInvalid, readForm, schemaForm } from "../schema_form.js";
import { chooseSkill } from "../skill_pick.js";

function toolButton(tool, onPick) {
  const context = tool.context || {};
  const button = h(
    "button",
    { type: "button", className: "tool", dataset: { tool: tool.tool_id } },
    h("strong", {}, tool.tool_id),
    " ",
    h("span", { className: "muted" }, tool.semantics),
    " ",
    stateBadge(context.ready ? "ready" : "not-ready"),
  );
  button.addEventListener("click", () => onPick(tool));
  return button;
}

async function follow(skill, invocationId, view, alive, say) {
  const path = `api/cell/${enc(skill)}/invocations/${enc(invocationId)}`;
  while (alive()) {
    let status;
    try {
      status = (await getJson(path)).invocation;
    } catch (error) {
      view.phase.replaceChildren(stateBadge("unknown"), ` ${errorText(error)}`);
      return;
    }
    view.phase.replaceChildren(stateBadge(status.phase), " ", progressText(status));
    view.cancel.replaceChildren(cancelButton(skill, status, say) || "");
    if (TERMINAL.has(status.phase)) {
      view.outcome.textContent = outcomeText(status);
      view.result.textContent = JSON.stringify(status.result ?? null, null, 2);
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, 300));
  }
}

function detail(skill, tool, alive, say) {
  const form = schemaForm(tool.input_schema, { id: "tool-form" });
  const view = {
    phase: h("span", { id: "run-phase" }),
    outcome: h("strong", { id: "run-outcome" }),
    cancel: h("span", { id: "run-cancel" }),
    result: h("pre", { id: "run-result", className: "result" }),
  };
  const run = h("button", { type: "submit", id: "run" }, `Run ${tool.semantics}`);
  const submit = async (event) => {
    event.preventDefault();
    let args;
    try {
      args = readForm(form);
    } catch (error) {
      // The fields say what is wrong, each beside itself (FormInvalid).
      if (!(error instanceof FormInvalid)) say(error.message, true);
      return;
    }
    run.disabled = true;
    view.outcome.textContent = "";
    view.result.textContent = "";
    view.phase.replaceChildren(stateBadge("dispatching"));
    try {
      const path = `api/cell/${enc(skill)}/tools/${enc(tool.tool_id)}/run`;
      const answer = await postJson(path, { arguments: args });
      if (answer.semantics === "query") {
        view.phase.replaceChildren(stateBadge("completed"));
        view.outcome.textContent = "answered";
        view.result.textContent = JSON.stringify(answer.response, null, 2);
      } else {
        say(`${tool.tool_id} admitted as ${answer.admission.invocation_id}`);
        await follow(skill, answer.admission.invocation_id, view, alive, say);
      }
    } catch (error) {
      view.phase.replaceChildren(stateBadge("refused"));
      view.result.textContent = errorText(error);
    } finally {
      run.disabled = false;
    }
  };
  const context = tool.context || {};
  return h(
    "section",
    { className: "tool-detail", dataset: { tool: tool.tool_id } },
    h("h2", {}, tool.tool_id, " ", h("span", { className: "muted" }, tool.semantics)),
    h("p", {}, tool.description || ""),
    h(
      "p",
      { className: "context" },
      "ready: ",
      stateBadge(context.ready ? "ready" : "not-ready"),
      ` · active ${context.active_invocations ?? 0}/${context.max_concurrency ?? "?"}`,
      context.binding_error ? ` · ${context.binding_error}` : "",
    ),
    h("details", {}, h("summary", {}, "input schema"), h("pre", {}, JSON.stringify(tool.input_schema, null, 2))),
    h("form", { onsubmit: submit }, form, h("div", { className: "toolbar" }, run, view.cancel)),
    h("p", {}, "phase: ", view.phase, " ", view.outcome),
    view.result,
  );
}

export async function render(root, { args, say }) {
  let live = true;
  const alive = () => live && root.isConnected;
  root.append(h("h1", {}, "Tools"));
  const skill = await chooseSkill(root, () => location.reload());
  if (!skill) return () => {};
  const tools = (await getJson(`api/cell/${enc(skill)}/tools`)).tools;
  const pane = h("div", { className: "tool-pane" });
  const pick = (tool) => {
    history.replaceState(null, "", `#/tools/${enc(tool.tool_id)}`);
    clear(pane).append(detail(skill, tool, alive, say));
  };
  const list = h("div", { className: "tool-list", id: "tool-list" }, tools.map((t) => toolButton(t, pick)));
  root.append(h("div", { className: "split" }, list, pane));
  const wanted = tools.find((t) => t.tool_id === args[0]) || null;
  if (wanted) pick(wanted);
  else pane.append(h("p", { className: "muted" }, `${tools.length} tools; pick one to run it.`));
  return () => {
    live = false;
  };
}
