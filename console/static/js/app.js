// The console shell: the login form, the hash router and the one status line, which
// belongs to the page shown: cleared on navigation, and deaf to a page already left.

import { ApiError, getJson, setToken, token } from "./api.js";
import { errorText, h } from "./dom.js";
import * as apiTools from "./pages/api_tools.js";
import * as approvals from "./pages/approvals.js";
import * as audit from "./pages/audit.js";
import * as cell from "./pages/cell.js";
import * as recipes from "./pages/recipes.js";
import * as skills from "./pages/skills.js";
import * as tasks from "./pages/tasks.js";
import * as tools from "./pages/tools.js";

const PAGES = {
  cell,
  skills,
  tools,
  tasks,
  approvals,
  "api-tools": apiTools,
  recipes,
  audit,
};

const $ = (id) => document.getElementById(id);
let cleanup = () => {};
let badgeTimer = null;
let shown = 0; // which page render owns the status line

export function say(text, isError = false) {
  const line = $("status");
  line.textContent = text;
  line.className = isError ? "error" : "";
}

// The status line for render number ``owner``: a late answer of a page already left
// (an Action admitted, a start finished) does not write over the page shown now.
function sayFor(owner) {
  return (text, isError = false) => {
    if (owner === shown) say(text, isError);
  };
}

function showLogin(message = "") {
  shown += 1;
  say("");
  cleanup();
  cleanup = () => {};
  clearInterval(badgeTimer);
  $("nav").hidden = true;
  $("logout").hidden = true;
  $("page").hidden = true;
  $("login-page").hidden = false;
  $("login-error").textContent = message;
  $("token").focus();
}

// A token the console cannot use: a wrong one (401), or the agents' token where serve has
// an operator token of its own (403 OPERATOR_REQUIRED).
const REFUSED = "The token was refused: give the operator token (doraforge serve --operator-token-env or --operator-token-file; without those, its --token-env or --token-file).";

function refused(error) {
  return error instanceof ApiError && (error.status === 401 || error.code === "OPERATOR_REQUIRED");
}

async function checkSession() {
  try {
    return await getJson("api/session");
  } catch (error) {
    if (refused(error)) return null;
    throw error;
  }
}

async function pendingBadge() {
  const badge = $("pending-count");
  try {
    const answer = await getJson("/api/approvals?state=pending");
    const count = answer.approvals.length;
    badge.textContent = String(count);
    badge.hidden = count === 0;
  } catch {
    badge.hidden = true;
  }
}

function route() {
  const [name, ...rest] = location.hash.replace(/^#\/?/, "").split("/");
  return { page: PAGES[name] ? name : "cell", args: rest.map(decodeURIComponent) };
}

async function show() {
  cleanup();
  cleanup = () => {};
  const { page, args } = route();
  for (const link of $("nav").querySelectorAll("a")) {
    link.classList.toggle("active", link.getAttribute("href") === `#/${page}`);
  }
  // Each render draws into a container of its own: a page left while it still loads
  // (the Cell page waiting for its skills) then draws into a detached one, not this page.
  const root = h("div", { className: "page-root" });
  $("page").replaceChildren(root);
  $("page").dataset.page = page;
  shown += 1;
  say("");
  const pageSay = sayFor(shown);
  try {
    cleanup = (await PAGES[page].render(root, { args, say: pageSay })) || (() => {});
  } catch (error) {
    if (refused(error)) {
      setToken(null);
      showLogin(REFUSED);
      return;
    }
    pageSay(errorText(error), true);
  }
}

async function enter() {
  const session = await checkSession();
  if (session === null) {
    setToken(null);
    showLogin(token() ? REFUSED : "");
    return;
  }
  $("login-page").hidden = true;
  $("nav").hidden = false;
  $("logout").hidden = !session.token_required;
  $("page").hidden = false;
  clearInterval(badgeTimer);
  pendingBadge();
  badgeTimer = setInterval(pendingBadge, 3000);
  await show();
}

function start() {
  $("login").addEventListener("submit", async (event) => {
    event.preventDefault();
    setToken($("token").value.trim());
    $("token").value = "";
    const session = await checkSession().catch((error) => {
      $("login-error").textContent = errorText(error);
      return undefined;
    });
    if (session === null) {
      setToken(null);
      showLogin(REFUSED);
      return;
    }
    if (session) await enter();
  });
  $("logout").addEventListener("click", () => {
    setToken(null);
    showLogin("Signed out.");
  });
  window.addEventListener("hashchange", () => {
    if (!$("page").hidden) show();
  });
  enter().catch((error) => showLogin(errorText(error)));
}

start();
