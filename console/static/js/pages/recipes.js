// Recipes: the saved read recipes agents call as recipe.* tools (with the callToolRecipes
// grant). The operator lists them with their status and availability, reads a definition
// and its revisions, saves a definition from the JSON editor (the server validates it
// against the tools it has), archives and restores. Everything goes through the operator's
// /api/recipes routes; an agent never sees a definition.

import { enc, getJson, postJson } from "../api.js";
import { errorText, h, table, when } from "../dom.js";

const TEMPLATE = {
  name: "recipe.my-read",
  description: "What an agent gets by calling it.",
  input_schema: { type: "object", additionalProperties: false, properties: {} },
  steps: [{ tool: "forge.runtime.status", arguments: {} }],
  output: [1],
};

function availabilityText(recipe) {
  if (recipe.status === "archived") return "archived";
  const status = recipe.availability || {};
  return status.available ? "available" : `unavailable: ${status.code || "unknown"}`;
}

async function act(path, body, say, done) {
  try {
    const answer = await postJson(path, body);
    say(`${answer.recipe.name}: ${answer.recipe.status}, rev ${answer.recipe.activeRevision}`);
  } catch (error) {
    say(errorText(error), true);
  }
  await done();
}

function actionButton(recipe, say, refresh) {
  if (recipe.status === "archived") {
    return h("button", { type: "button", className: "restore", onclick: () => act(`/api/recipes/${enc(recipe.name)}/restore`, {}, say, refresh) }, "Restore");
  }
  return h("button", { type: "button", className: "archive danger", onclick: () => act(`/api/recipes/${enc(recipe.name)}/archive`, {}, say, refresh) }, "Archive");
}

function recipeRow(recipe, say, refresh) {
  return h(
    "tr",
    { dataset: { recipe: recipe.name } },
    h("td", {}, h("a", { className: "recipe-link", href: `#/recipes/${enc(recipe.name)}` }, recipe.name)),
    h("td", { className: "recipe-status" }, availabilityText(recipe)),
    h("td", {}, `rev ${recipe.activeRevision} of ${recipe.revisions}`),
    h("td", {}, (recipe.tools || []).join(", ")),
    h("td", {}, recipe.description),
    h("td", {}, actionButton(recipe, say, refresh)),
  );
}

function editor(initial, say, saved) {
  const text = h("textarea", { id: "recipe-editor", rows: 18, cols: 90, spellcheck: "false", "aria-label": "recipe definition (JSON)" });
  text.value = JSON.stringify(initial, null, 2);
  const result = h("p", { id: "recipe-result", role: "status" });
  const submit = async (event) => {
    event.preventDefault();
    let definition;
    try {
      definition = JSON.parse(text.value);
    } catch (error) {
      result.textContent = `RECIPE_INVALID: the editor does not hold JSON (${error.message})`;
      result.className = "error";
      return;
    }
    try {
      const answer = await postJson("/api/recipes", definition);
      const verb = answer.added ? "saved" : "unchanged";
      result.textContent = `${verb} ${answer.recipe.name} rev ${answer.recipe.activeRevision}`;
      result.className = "";
      say(result.textContent);
      await saved(answer.recipe);
    } catch (error) {
      result.textContent = errorText(error);
      result.className = "error";
    }
  };
  return h(
    "section",
    { className: "recipe-editor" },
    h("h2", {}, "Save a definition"),
    h("p", { className: "muted" }, 'At most 5 read steps; bind arguments with {"$input": "field"} or {"$step": k, "pointer": "/json/pointer"}. Saving the same name adds a revision.'),
    h("form", { id: "recipe-form", onsubmit: submit }, text, h("div", { className: "toolbar" }, h("button", { type: "submit", id: "recipe-save" }, "Save"))),
    result,
  );
}

async function list(root, say) {
  const body = h("tbody");
  const skipped = h("ul", { id: "recipes-skipped" });
  const refresh = async () => {
    const answer = await getJson("/api/recipes");
    body.replaceChildren(...answer.recipes.map((r) => recipeRow(r, say, refresh)));
    if (answer.recipes.length === 0) body.append(h("tr", { className: "empty" }, h("td", { colspan: 6 }, "No recipe saved yet.")));
    skipped.replaceChildren(...answer.skipped.map((s) => h("li", { className: "error" }, `${s.file}: ${s.code}: ${s.message}`)));
  };
  root.append(
    h("h1", {}, "Recipes"),
    h("p", { className: "muted" }, "Saved read recipes are recipe.* tools for agents granted callToolRecipes; each child call still needs its own grant."),
    h("table", { id: "recipes" }, h("thead", {}, h("tr", {}, ["recipe", "status", "revision", "tools", "description", ""].map((t) => h("th", {}, t)))), body),
    skipped,
    editor(TEMPLATE, say, refresh),
  );
  await refresh();
}

function revisionRow(recipe, revision, say, refresh) {
  const active = revision.revision === recipe.activeRevision && recipe.status === "active";
  const restore = h("button", { type: "button", className: "restore-revision", onclick: () => act(`/api/recipes/${enc(recipe.name)}/restore`, { revision: revision.revision }, say, refresh) }, "Make active");
  return h(
    "tr",
    { dataset: { revision: String(revision.revision) } },
    h("td", {}, `rev ${revision.revision}${active ? " (active)" : ""}`),
    h("td", {}, when(revision.savedAt)),
    h("td", {}, Object.keys(revision.fingerprints).join(", ")),
    h("td", {}, active ? "" : restore),
  );
}

async function detail(root, name, say) {
  const section = h("section", { id: "recipe-detail" });
  const refresh = async () => {
    const recipe = (await getJson(`/api/recipes/${enc(name)}`)).recipe;
    const current = recipe.history.find((r) => r.revision === recipe.activeRevision);
    section.replaceChildren(
      h("p", { className: "recipe-status" }, `${availabilityText(recipe)} · rev ${recipe.activeRevision} of ${recipe.revisions}`),
      (recipe.availability && recipe.availability.reason) ? h("p", { className: "error" }, recipe.availability.reason) : "",
      h("h2", {}, "Active definition"),
      h("pre", { id: "recipe-definition", className: "result" }, JSON.stringify(current.definition, null, 2)),
      h("h2", {}, "Revisions"),
      table(["revision", "saved", "tools", ""], recipe.history.map((r) => revisionRow(recipe, r, say, refresh)), { id: "recipe-revisions" }),
      h("div", { className: "toolbar" }, actionButton(recipe, say, refresh)),
      editor(current.definition, say, refresh),
    );
  };
  root.append(h("p", {}, h("a", { href: "#/recipes" }, "← all recipes")), h("h1", {}, name), section);
  await refresh();
}

export async function render(root, { args, say }) {
  if (args[0]) await detail(root, args[0], say);
  else await list(root, say);
  return () => {};
}
