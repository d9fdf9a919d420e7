// The console's entry: reads /ui/config.json (registry or node) and routes on the URL's hash.
//   registry: #/ the network, #/agent/<id> one agent
//   node:     #/ this node and its skills' forms, #/tasks recent tasks, #/task/<id> one task

import { getJSON, token } from "./api.js";
import { errorBox, h, replace } from "./dom.js";
import { networkView, registryAgentView } from "./network.js";
import { nodeView, tasksView } from "./node.js";
import { taskView } from "./task.js";

const main = document.getElementById("main");
let config = null;
let leave = null;

function navigation() {
  const links = config.role === "registry"
    ? [["#/", "Network"]]
    : [["#/", "Node and skills"], ["#/tasks", "Recent tasks"]];
  const here = location.hash.split("?")[0] || "#/";
  replace(document.getElementById("nav"), links.map(([href, label]) =>
    h("li", {}, h("a", { href, "aria-current": here === href ? "page" : null }, label))));
}

function route() {
  if (leave) leave();
  leave = null;
  navigation();
  const path = (location.hash.slice(1) || "/").split("?")[0];
  const [, first, second] = path.split("/");
  let result;
  if (config.role === "registry") {
    result = first === "agent" && second ? registryAgentView(main, decodeURIComponent(second)) : networkView(main, config);
  } else if (first === "task" && second) {
    result = taskView(main, config, decodeURIComponent(second));
  } else if (first === "tasks") {
    result = tasksView(main, config);
  } else {
    result = nodeView(main, config);
  }
  if (typeof result === "function") leave = result;
}

function tokenForm() {
  const form = document.getElementById("token-form");
  const input = document.getElementById("token");
  input.value = token.get();
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    token.set(input.value.trim());
    route();
  });
  document.getElementById("token-clear").addEventListener("click", () => {
    input.value = "";
    token.set("");
    route();
  });
}

async function start() {
  try {
    config = await getJSON("/ui/config.json");
  } catch (error) {
    replace(main, errorBox(error));
    return;
  }
  document.getElementById("role").textContent = config.role === "registry" ? "— network" : `— node ${config.agent_id}`;
  document.title = config.role === "registry" ? "Network — a2a-node console" : `${config.agent_id} — a2a-node console`;
  tokenForm();
  window.addEventListener("hashchange", route);
  route();
}

start();
