// Which running skill the Cell and Tools pages show: the operator's last choice, else the
// first running one. The browser names a skill, never a URL.

import { getJson } from "./api.js";
import { h } from "./dom.js";

const CHOICE_KEY = "doraforge.console.skill";

export async function runningSkills() {
  const answer = await getJson("api/skills");
  return answer.skills.filter((s) => s.runtime && s.runtime.state === "running");
}

export async function chooseSkill(root, onChoose) {
  const running = await runningSkills();
  if (running.length === 0) {
    root.append(
      h(
        "p",
        { className: "empty", id: "no-skill" },
        "No skill is running. Start one on the ",
        h("a", { href: "#/skills" }, "Skills"),
        " page.",
      ),
    );
    return null;
  }
  const names = running.map((s) => s.name);
  const saved = sessionStorage.getItem(CHOICE_KEY);
  const chosen = names.includes(saved) ? saved : names[0];
  const select = h(
    "select",
    { id: "skill-choice", "aria-label": "running skill" },
    names.map((name) => h("option", { value: name, selected: name === chosen }, name)),
  );
  select.addEventListener("change", () => {
    sessionStorage.setItem(CHOICE_KEY, select.value);
    onChoose(select.value);
  });
  root.append(h("div", { className: "toolbar" }, h("label", {}, "Skill ", select)));
  return chosen;
}
