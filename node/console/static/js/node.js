// A node's own pages: its card with a form per skill, and its recent tasks (ListTasks).

import { getJSON } from "./api.js";
import { cardSummary, skillSchemas, skillSection } from "./card.js";
import { STATE_LABELS, errorBox, h, messageText, replace, stateBadge, time } from "./dom.js";
import { skillForm } from "./form.js";
import { sendAndFollow } from "./task.js";

const TASKS_PAGE = 10;

function newMessage(skill, args, structured) {
  const parts = structured
    ? [{ data: { skill: skill.id, arguments: args } }]
    : [{ text: args.text || "" }];
  return {
    messageId: crypto.randomUUID(),
    role: "ROLE_USER",
    parts,
    ...(structured ? {} : { metadata: { skill: skill.id } }),
  };
}

export async function nodeView(main, config) {
  replace(main, h("h1", {}, "Node"), h("p", {}, "Loading…"));
  let card;
  try {
    card = await getJSON("/.well-known/agent-card.json");
  } catch (error) {
    replace(main, h("h1", {}, "Node"), errorBox(error));
    return;
  }
  const schemas = skillSchemas(card);
  const submit = async (skill, args, structured) => {
    const id = await sendAndFollow(config.rest, newMessage(skill, args, structured));
    location.hash = `#/task/${encodeURIComponent(id)}`;
  };
  replace(
    main,
    h("h1", {}, card.name || config.agent_id, " ", h("code", {}, config.agent_id)),
    h("section", { "aria-labelledby": "card-h" }, h("h2", { id: "card-h" }, "Card"), cardSummary(card)),
    h("section", { "aria-labelledby": "skills-h" }, h("h2", { id: "skills-h" }, `Skills (${(card.skills || []).length})`),
      (card.skills || []).map((s) => skillSection(s, schemas[s.id], (skill, schema) => skillForm(skill, schema, submit)))),
  );
}

export function tasksView(main, config) {
  const params = new URLSearchParams(location.hash.split("?")[1] || "");
  const state = h("select", { id: "t-state", name: "status" },
    h("option", { value: "" }, "any"),
    Object.entries(STATE_LABELS).map(([v, l]) => h("option", { value: v, selected: params.get("status") === v }, l)));
  const form = h("form", { class: "search", "aria-label": "Filter tasks" },
    h("div", { class: "field" }, h("label", { for: "t-state" }, "State"), state),
    h("button", { type: "submit" }, "Filter"));
  const body = h("tbody");
  const pager = h("nav", { "aria-label": "Task pages", class: "pager" });
  const problem = h("div");
  replace(
    main,
    h("h1", {}, "Recent tasks"),
    form,
    problem,
    h("table", { class: "tasks", id: "tasks" },
      h("caption", {}, "Tasks of this node visible to you, newest first"),
      h("thead", {}, h("tr", {}, ["Task", "State", "Updated", "Status message"].map((c) => h("th", { scope: "col" }, c)))),
      body),
    pager,
  );
  const tokens = [""]; // page tokens seen, for "previous"
  let page = 0;

  async function load() {
    try {
      const answer = await getJSON(`${config.rest}/tasks`, {
        pageSize: TASKS_PAGE, pageToken: tokens[page], status: state.value, historyLength: 0,
      });
      const tasks = answer.tasks || [];
      replace(problem);
      replace(body, tasks.length
        ? tasks.map((t) => h("tr", {},
          h("th", { scope: "row" }, h("a", { href: `#/task/${encodeURIComponent(t.id)}` }, h("code", {}, t.id))),
          h("td", {}, stateBadge(t.status?.state)),
          h("td", {}, time(t.status?.timestamp)),
          h("td", {}, messageText(t.status?.message).slice(0, 200))))
        : h("tr", {}, h("td", { colspan: 4 }, "No task.")));
      if (answer.nextPageToken) tokens[page + 1] = answer.nextPageToken;
      replace(pager,
        h("button", { type: "button", disabled: page === 0, onclick: () => { page -= 1; load(); } }, "Newer"),
        ` Page ${page + 1}${answer.totalSize ? ` of ${Math.ceil(answer.totalSize / TASKS_PAGE)}` : ""} `,
        h("button", { type: "button", disabled: !answer.nextPageToken, onclick: () => { page += 1; load(); } }, "Older"));
    } catch (error) {
      replace(problem, errorBox(error));
    }
  }
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    tokens.length = 1;
    page = 0;
    history.replaceState(null, "", `#/tasks${state.value ? `?status=${state.value}` : ""}`);
    load();
  });
  load();
}
