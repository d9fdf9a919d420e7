// One task: live progress (A2A streaming), status messages, artifacts and the calls it made.

import { getJSON, stream } from "./api.js";
import { FINAL_STATES, announce, errorBox, h, keepFocus, messageText, replace, stateBadge, time, tree } from "./dom.js";
import { argumentsForm } from "./form.js";

const CALLS_KEY = "a2a_node_calls";

// Tasks this page is following: id → {task, updates: [{state, text, at}], listeners, error}.
const followed = new Map();

function tracked(id) {
  if (!followed.has(id)) followed.set(id, { task: null, updates: [], listeners: new Set(), error: null, live: false });
  return followed.get(id);
}

function notify(entry) {
  for (const listener of entry.listeners) listener();
}

function noteStatus(entry, status) {
  if (!status) return;
  const text = messageText(status.message);
  const last = entry.updates[entry.updates.length - 1];
  if (last && last.state === status.state && last.text === text) return;
  entry.updates.push({ state: status.state, text, at: status.timestamp });
}

// Fold one StreamResponse into the followed task; returns the task id it was about.
function apply(event, known) {
  if (event.error) throw new Error(event.error.message || JSON.stringify(event.error));
  if (event.task) {
    const entry = tracked(event.task.id);
    entry.task = event.task;
    if (!entry.updates.length) {
      for (const m of event.task.history || []) {
        if (m.role === "ROLE_AGENT") entry.updates.push({ state: null, text: messageText(m), at: null });
      }
    }
    noteStatus(entry, event.task.status);
    return event.task.id;
  }
  const update = event.statusUpdate || event.artifactUpdate;
  if (!update) return known;
  const entry = tracked(update.taskId);
  const task = (entry.task ||= { id: update.taskId, contextId: update.contextId, artifacts: [], metadata: {} });
  if (event.statusUpdate) {
    task.status = update.status;
    task.metadata = { ...(task.metadata || {}), ...(update.metadata || {}) };
    noteStatus(entry, update.status);
  } else {
    const artifacts = (task.artifacts ||= []);
    const found = artifacts.find((a) => a.artifactId === update.artifact.artifactId);
    if (found && update.append) found.parts = [...(found.parts || []), ...(update.artifact.parts || [])];
    else if (found) Object.assign(found, update.artifact);
    else artifacts.push(update.artifact);
  }
  return update.taskId;
}

async function follow(events, onTask = null) {
  let id = null;
  try {
    for await (const event of events) {
      const before = id;
      id = apply(event, id);
      if (id) {
        const entry = tracked(id);
        entry.live = true;
        if (!before && onTask) onTask(id);
        notify(entry);
      }
    }
  } catch (error) {
    if (!id) throw error;
    if (error.name !== "AbortError") tracked(id).error = error;
  } finally {
    if (id) {
      tracked(id).live = false;
      notify(tracked(id));
    }
  }
}

// Send a message with message:stream; resolves with the task id once the node names the task.
export function sendAndFollow(rest, message) {
  return new Promise((resolve, reject) => {
    follow(stream(`${rest}/message:stream`, { method: "POST", body: { message } }), resolve).then(
      () => reject(new Error("the node answered without a task")),
      reject,
    );
  });
}

function short(text, limit = 300) {
  return !text || text.length <= limit ? text || "" : `${text.slice(0, limit)}… (the artifacts hold all of it)`;
}

function failureBox(task, config) {
  const state = task.status?.state;
  if (state !== "TASK_STATE_FAILED" && state !== "TASK_STATE_REJECTED") return null;
  const calls = task.metadata?.[CALLS_KEY] || [];
  const failed = [...calls].reverse().find((c) => c.outcome === "error" && c.peer) || [...calls].reverse().find((c) => c.outcome === "error");
  const where = failed?.peer
    ? h("span", {}, "on node ", h("strong", { class: "failed-node" }, failed.peer), ` (call ${failed.tool}${failed.remote_task_id ? `, its task ${failed.remote_task_id}` : ""})`)
    : h("span", {}, "on this node ", h("strong", { class: "failed-node" }, config.agent_id || ""), failed ? ` (call ${failed.tool})` : "");
  return h(
    "div",
    { class: "failure", role: "alert" },
    h("h2", {}, state === "TASK_STATE_REJECTED" ? "Rejected " : "Failed ", where),
    h("p", { class: "reason" }, failed?.error || messageText(task.status?.message) || "no reason given"),
    failed?.error && messageText(task.status?.message) !== failed.error ? h("p", { class: "help" }, "Task status: ", messageText(task.status.message)) : null,
  );
}

// The node's question of an input-required task: the data part with `pending` (direct planning:
// `missing` and their `schema`, or `candidates` to choose from).
function question(task) {
  for (const part of task.status?.message?.parts || []) {
    if (part.data && typeof part.data === "object" && part.data.pending) return part.data;
  }
  return null;
}

// A follow-up message on the same task; the task view follows its stream.
function reply(config, task, parts) {
  const message = { messageId: crypto.randomUUID(), role: "ROLE_USER", taskId: task.id, contextId: task.contextId, parts };
  return sendAndFollow(config.rest, message);
}

function choiceList(config, task, candidates) {
  const status = h("p", { class: "form-status", role: "status", "aria-live": "polite" });
  const choose = async (skill) => {
    status.classList.remove("error");
    status.textContent = "Sending…";
    try {
      await reply(config, task, [{ text: skill }]);
    } catch (error) {
      status.textContent = error.message;
      status.classList.add("error");
    }
  };
  return [
    h("ul", { class: "choices" }, candidates.map((c) => h("li", {},
      h("button", { type: "button", onclick: () => choose(c.skill) }, `Run ${c.skill}`),
      c.description ? ` ${c.description}` : null))),
    status,
  ];
}

// What the caller can answer an input-required task with: the missing arguments as a form, the
// candidate skills as buttons, or else free text.
function replyBox(task, config) {
  if (task.status?.state !== "TASK_STATE_INPUT_REQUIRED") return null;
  const data = question(task);
  const missing = Array.isArray(data?.missing) ? data.missing : [];
  let body;
  if (missing.length && data.schema?.properties) {
    body = argumentsForm({
      id: "reply-form",
      label: "Reply with the missing arguments",
      properties: Object.fromEntries(missing.map((name) => [name, data.schema.properties[name] || {}])),
      required: new Set(missing),
      button: "Reply",
      onSubmit: (args) => reply(config, task, [{ data: { arguments: args } }]),
    });
  } else if (Array.isArray(data?.candidates) && data.candidates.length) {
    body = choiceList(config, task, data.candidates);
  } else {
    body = argumentsForm({
      id: "reply-form",
      label: "Reply",
      properties: { reply: { type: "string", description: "Your answer, in words.", maxLength: 10000 } },
      required: new Set(["reply"]),
      button: "Reply",
      onSubmit: (args) => reply(config, task, [{ text: args.reply }]),
    });
  }
  return h("section", { "aria-labelledby": "reply-h", id: "reply" },
    h("h2", { id: "reply-h" }, "The node asks"),
    h("p", { class: "question" }, messageText(task.status.message)),
    body);
}

function partView(part, index) {
  if (typeof part.text === "string") return h("pre", { class: "text" }, part.text);
  if (part.data !== undefined) return tree(part.data);
  const name = part.filename || `file-${index + 1}`;
  if (part.raw !== undefined) {
    const bytes = Uint8Array.from(atob(part.raw), (c) => c.charCodeAt(0));
    const url = URL.createObjectURL(new Blob([bytes], { type: part.mediaType || "application/octet-stream" }));
    return h("a", { href: url, download: name }, `Download ${name} (${bytes.length} bytes)`);
  }
  if (part.url) return h("a", { href: part.url, download: name, rel: "noopener noreferrer" }, `Download ${name}`);
  return tree(part);
}

function artifactsView(task) {
  const artifacts = task.artifacts || [];
  return h(
    "section",
    { "aria-labelledby": "artifacts-h", id: "artifacts" },
    h("h2", { id: "artifacts-h" }, `Artifacts (${artifacts.length})`),
    artifacts.length
      ? artifacts.map((a) => h("article", { class: "artifact", dataset: { name: a.name || "" } }, h("h3", {}, a.name || a.artifactId), (a.parts || []).map(partView)))
      : h("p", { class: "help" }, "None yet."),
  );
}

// The calls as a timeline: one row per call, its bar placed by start and length by duration.
export function timeline(calls) {
  if (!calls.length) return h("p", { class: "help" }, "No calls recorded.");
  const starts = calls.map((c) => new Date(c.started_at).getTime());
  const origin = Math.min(...starts);
  const end = Math.max(...calls.map((c, i) => starts[i] + c.duration_ms));
  const span = Math.max(end - origin, 1);
  const rows = calls
    .map((c, i) => ({ c, start: starts[i] }))
    .sort((a, b) => a.start - b.start)
    .map(({ c, start }) => {
      const bar = h("span", { class: `bar ${c.outcome}`, "aria-hidden": "true" });
      bar.style.left = `${((start - origin) / span) * 100}%`;
      bar.style.width = `${Math.max((c.duration_ms / span) * 100, 0.5)}%`;
      const label = `${c.tool}${c.peer ? ` → node ${c.peer}` : ""}: ${c.outcome}, ${c.duration_ms.toFixed(1)} ms, from +${(start - origin).toFixed(0)} ms`;
      return h(
        "li",
        { class: `call ${c.outcome}`, dataset: { tool: c.tool, peer: c.peer || "" } },
        h("span", { class: "call-label" }, h("code", {}, c.tool), c.peer ? [" → ", h("strong", {}, c.peer)] : null,
          ` ${c.duration_ms.toFixed(1)} ms`, c.outcome === "error" ? h("span", { class: "call-error" }, ` — ${c.error}`) : null),
        h("span", { class: "track", role: "img", "aria-label": label }, bar),
      );
    });
  return h("ol", { class: "timeline", "aria-label": `Calls, over ${span.toFixed(0)} ms` }, rows);
}

export function taskView(main, config, id) {
  const entry = tracked(id);
  let stopped = false;
  const render = () => {
    if (stopped) return;
    const task = entry.task;
    if (!task) {
      replace(main, h("h1", {}, "Task ", h("code", {}, id)), entry.error ? errorBox(entry.error) : h("p", {}, "Loading…"));
      return;
    }
    const state = task.status?.state;
    const calls = task.metadata?.[CALLS_KEY] || [];
    keepFocus(main, () => replace(
      main,
      h("h1", {}, "Task ", h("code", {}, id)),
      h("p", { id: "task-state", "aria-live": "polite" }, "State: ", stateBadge(state),
        entry.live ? h("span", { class: "live" }, " following live") : null,
        task.status?.timestamp ? [" since ", time(task.status.timestamp)] : null),
      entry.error ? errorBox(entry.error) : null,
      failureBox(task, config),
      replyBox(task, config),
      h("section", { "aria-labelledby": "progress-h" }, h("h2", { id: "progress-h" }, "Progress"),
        h("ol", { class: "updates", id: "updates" }, entry.updates.map((u) =>
          h("li", {}, u.state ? stateBadge(u.state) : null, " ", short(u.text), u.at ? [" ", time(u.at)] : null)))),
      h("section", { "aria-labelledby": "calls-h", id: "calls" }, h("h2", { id: "calls-h" }, `Calls (${calls.length})`), timeline(calls)),
      artifactsView(task),
      h("p", {}, h("a", { href: "#/" }, "Back to the node")),
    ));
    if (FINAL_STATES.has(state)) announce(`Task ${id} ${state.replace("TASK_STATE_", "").toLowerCase()}`);
  };
  entry.listeners.add(render);
  render();
  const controller = new AbortController();
  if (!entry.live) {
    (async () => {
      try {
        const task = await getJSON(`${config.rest}/tasks/${encodeURIComponent(id)}`, { historyLength: 100 });
        entry.updates = [];
        apply({ task }, id);
        notify(entry);
        if (!FINAL_STATES.has(task.status?.state)) {
          await follow(stream(`${config.rest}/tasks/${encodeURIComponent(id)}:subscribe`, { signal: controller.signal }));
        }
      } catch (error) {
        if (error.name === "AbortError") return;
        entry.error = error;
        notify(entry);
      }
    })();
  }
  return () => {
    stopped = true;
    entry.listeners.delete(render);
    controller.abort();
  };
}
