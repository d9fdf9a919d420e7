// The registry's pages: the network (agents, health, search) and one agent's card.

import { getJSON } from "./api.js";
import { cardSummary, skillSchemas, skillSection } from "./card.js";
import { ago, announce, errorBox, h, keepFocus, replace, time } from "./dom.js";

const PAGE_SIZE = 50;

export function consoleUrl(entry) {
  try {
    return new URL("/ui/", entry.card_url).href;
  } catch {
    return null;
  }
}

function tagsOf(entry) {
  return [...new Set((entry.skills || []).flatMap((s) => s.tags || []))];
}

function agentRow(entry) {
  const link = consoleUrl(entry);
  const health = entry.healthy ? "healthy" : "unhealthy";
  return h(
    "tr",
    { dataset: { agent: entry.id, health } },
    h("th", { scope: "row" }, h("a", { href: `#/agent/${encodeURIComponent(entry.id)}` }, entry.name || entry.id), h("br"), h("code", {}, entry.id)),
    h("td", {}, h("span", { class: `badge ${health}` }, health)),
    h("td", {}, time(entry.last_heartbeat), h("br"), h("span", { class: "help" }, ago(entry.last_heartbeat))),
    h("td", {}, h("ul", { class: "plain" }, (entry.skills || []).map((s) => h("li", {}, h("code", {}, s.id))))),
    h("td", {}, tagsOf(entry).map((t) => h("span", { class: "tag" }, t))),
    h("td", {}, link ? h("a", { href: link, "aria-label": `Console of ${entry.id}` }, "Open console") : "—"),
  );
}

export function networkView(main, config) {
  const query = new URLSearchParams(location.hash.split("?")[1] || "");
  const field = (name, label, attrs = {}) =>
    h("div", { class: "field" }, h("label", { for: `q-${name}` }, label),
      h("input", { id: `q-${name}`, name, type: "search", value: query.get(name) || "", ...attrs }));
  const health = h("select", { id: "q-healthy", name: "healthy" },
    [["", "any"], ["true", "healthy"], ["false", "unhealthy"]].map(([v, l]) => h("option", { value: v, selected: query.get("healthy") === v }, l)));
  const form = h(
    "form",
    { class: "search", role: "search", "aria-label": "Search agents" },
    field("q", "Text"),
    field("skill", "Skill id"),
    field("tag", "Tag"),
    h("div", { class: "field" }, h("label", { for: "q-healthy" }, "Health"), health),
    h("button", { type: "submit" }, "Search"),
  );
  const updated = h("p", { class: "help", id: "updated" });
  const body = h("tbody");
  const more = h("button", { type: "button", hidden: true }, "More agents");
  const problem = h("div");
  const table = h(
    "table",
    { class: "agents", id: "agents" },
    h("caption", {}, "Agents registered in this network"),
    h("thead", {}, h("tr", {}, ["Agent", "Health", "Last heartbeat", "Skills", "Tags", "Console"].map((c) => h("th", { scope: "col" }, c)))),
    body,
  );
  replace(main, h("h1", {}, "Network"), form, updated, problem, table, more);

  let pages = 1;
  let timer = null;
  let stopped = false;
  const params = () => Object.fromEntries(new FormData(form).entries());

  async function load() {
    clearTimeout(timer);
    try {
      const entries = [];
      let token = "";
      let next = null;
      for (let i = 0; i < pages; i++) {
        const page = await getJSON("/v1/agents", { ...params(), page_size: PAGE_SIZE, page_token: token, include_card: "false" });
        entries.push(...page.agents);
        next = page.next_page_token;
        if (!next) break;
        token = next;
      }
      if (stopped) return;
      keepFocus(body, () => replace(body, entries.length ? entries.map(agentRow) : h("tr", {}, h("td", { colspan: 6 }, "No agent matches."))));
      more.hidden = !next;
      replace(problem);
      const healthy = entries.filter((e) => e.healthy).length;
      replace(updated, `${entries.length} agents, ${healthy} healthy — updated `, time(new Date().toISOString()));
    } catch (error) {
      if (stopped) return;
      replace(problem, errorBox(error));
    }
    if (!stopped) timer = setTimeout(load, config.refresh_ms || 2000);
  }

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    pages = 1;
    const search = new URLSearchParams(Object.entries(params()).filter(([, v]) => v));
    history.replaceState(null, "", `#/${search.size ? `?${search}` : ""}`);
    announce("Searching…");
    load();
  });
  more.addEventListener("click", () => {
    pages += 1;
    load();
  });
  load();
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}

export async function registryAgentView(main, agentId) {
  replace(main, h("h1", {}, "Agent ", h("code", {}, agentId)), h("p", {}, "Loading…"));
  let entry;
  try {
    entry = await getJSON(`/v1/agents/${encodeURIComponent(agentId)}`);
  } catch (error) {
    replace(main, h("h1", {}, "Agent ", h("code", {}, agentId)), errorBox(error));
    return;
  }
  const card = entry.card || {};
  const schemas = skillSchemas(card);
  const link = consoleUrl(entry);
  replace(
    main,
    h("h1", {}, card.name || entry.name || agentId, " ", h("span", { class: `badge ${entry.healthy ? "healthy" : "unhealthy"}` }, entry.healthy ? "healthy" : "unhealthy")),
    h("p", {}, "Last heartbeat ", time(entry.last_heartbeat), ` (${ago(entry.last_heartbeat)}); registered `, time(entry.registered_at), "."),
    link ? h("p", {}, h("a", { href: link, class: "button" }, `Open ${entry.id}'s console`), " to send it a task (its own access rules apply).") : null,
    h("section", { "aria-labelledby": "card-h" }, h("h2", { id: "card-h" }, "Card"), cardSummary(card)),
    h("section", { "aria-labelledby": "skills-h" }, h("h2", { id: "skills-h" }, "Skills"),
      (card.skills || []).map((s) => skillSection(s, schemas[s.id]))),
  );
}
