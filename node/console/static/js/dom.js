// A tiny element builder (text is always set as text, never parsed as HTML) and shared bits.

export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else if (key === "class") el.className = value;
    else if (key === "dataset") Object.assign(el.dataset, value);
    else if (value === true) el.setAttribute(key, "");
    else el.setAttribute(key, String(value));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

export function replace(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

const FOCUSABLE = "a[href], button, input, select, textarea, summary";

// Re-render `container` with `render()` and put the keyboard focus back where it was (by position
// among the focusable elements), so live updates do not throw a keyboard user out of the page.
export function keepFocus(container, render) {
  const active = document.activeElement;
  const before = active && container.contains(active) ? [...container.querySelectorAll(FOCUSABLE)].indexOf(active) : -1;
  render();
  if (before >= 0) {
    const again = container.querySelectorAll(FOCUSABLE)[before];
    if (again) again.focus({ preventScroll: true });
  }
}

export function announce(text) {
  replace(document.getElementById("announce"), text);
}

export function errorBox(error) {
  return h("p", { class: "error", role: "alert" }, String(error.message || error));
}

// A JSON value as a tree of nested lists (objects and arrays collapse with <details>).
export function tree(value, label = null, depth = 0) {
  if (value !== null && typeof value === "object") {
    const entries = Array.isArray(value) ? value.map((v, i) => [i, v]) : Object.entries(value);
    const kind = Array.isArray(value) ? `[${entries.length}]` : `{${entries.length}}`;
    return h(
      "details",
      { class: "tree", open: depth < 2 || entries.length <= 3 },
      h("summary", {}, label === null ? kind : h("span", {}, h("span", { class: "key" }, `${label}`), ` ${kind}`)),
      h("ul", {}, entries.map(([k, v]) => h("li", {}, tree(v, k, depth + 1)))),
    );
  }
  const shown = typeof value === "string" ? JSON.stringify(value) : String(value);
  return label === null
    ? h("code", { class: `leaf ${typeof value}` }, shown)
    : h("span", {}, h("span", { class: "key" }, `${label}: `), h("code", { class: `leaf ${typeof value}` }, shown));
}

export function time(iso) {
  if (!iso) return "";
  const at = new Date(iso);
  return h("time", { datetime: iso, title: iso }, at.toLocaleTimeString());
}

export function ago(iso, now = Date.now()) {
  if (!iso) return "never";
  const seconds = Math.max(0, Math.round((now - new Date(iso).getTime()) / 1000));
  if (seconds < 60) return `${seconds} s ago`;
  if (seconds < 3600) return `${Math.round(seconds / 60)} min ago`;
  return `${Math.round(seconds / 3600)} h ago`;
}

export const STATE_LABELS = {
  TASK_STATE_SUBMITTED: "submitted",
  TASK_STATE_WORKING: "working",
  TASK_STATE_COMPLETED: "completed",
  TASK_STATE_FAILED: "failed",
  TASK_STATE_CANCELED: "canceled",
  TASK_STATE_REJECTED: "rejected",
  TASK_STATE_INPUT_REQUIRED: "input required",
  TASK_STATE_AUTH_REQUIRED: "auth required",
};

export const FINAL_STATES = new Set([
  "TASK_STATE_COMPLETED",
  "TASK_STATE_FAILED",
  "TASK_STATE_CANCELED",
  "TASK_STATE_REJECTED",
  "TASK_STATE_INPUT_REQUIRED",
  "TASK_STATE_AUTH_REQUIRED",
]);

export function stateBadge(state) {
  const label = STATE_LABELS[state] || state || "unknown";
  return h("span", { class: `badge state-${label.replace(/ /g, "-")}`, dataset: { state: label } }, label);
}

export function messageText(message) {
  if (!message || !message.parts) return "";
  return message.parts.filter((p) => typeof p.text === "string").map((p) => p.text).join("\n");
}
