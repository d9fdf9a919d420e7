// A form generated from a skill's JSON Schema (an object of properties), and its arguments back.
// Strings, numbers, integers, booleans and enums get their own inputs; anything else is JSON.

import { h } from "./dom.js";

function kindOf(prop) {
  if (Array.isArray(prop.enum)) return "enum";
  const type = Array.isArray(prop.type) ? prop.type.find((t) => t !== "null") : prop.type;
  return ["string", "integer", "number", "boolean"].includes(type) ? type : "json";
}

function field(formId, name, prop, required) {
  const id = `${formId}-${name}`;
  const helpId = `${id}-help`;
  const kind = kindOf(prop);
  const common = { id, name, "aria-describedby": prop.description ? helpId : null, required: required && kind !== "boolean" };
  let input;
  if (kind === "enum") {
    input = h("select", common, required ? null : h("option", { value: "" }, "—"),
      prop.enum.map((v) => h("option", { value: JSON.stringify(v), selected: prop.default === v }, String(v))));
  } else if (kind === "boolean") {
    input = h("input", { ...common, type: "checkbox", checked: prop.default === true });
  } else if (kind === "integer" || kind === "number") {
    input = h("input", {
      ...common,
      type: "number",
      step: kind === "integer" ? "1" : "any",
      min: prop.minimum,
      max: prop.maximum,
      value: prop.default,
      inputmode: kind === "integer" ? "numeric" : "decimal",
    });
  } else if (kind === "string") {
    const long = (prop.maxLength || 0) > 200 || /text|content|body/.test(name);
    const type = prop.format === "uri" || /url$/i.test(name) ? "url" : "text";
    input = long
      ? h("textarea", { ...common, rows: 4, minlength: prop.minLength, maxlength: prop.maxLength }, prop.default ?? "")
      : h("input", { ...common, type, value: prop.default, minlength: prop.minLength, maxlength: prop.maxLength, pattern: prop.pattern });
  } else {
    input = h("textarea", { ...common, rows: 3, class: "json", dataset: { json: "1" } },
      prop.default === undefined ? "" : JSON.stringify(prop.default, null, 2));
  }
  input.dataset.kind = kind;
  return h(
    "div",
    { class: `field field-${kind}` },
    h("label", { for: id }, name, required ? h("span", { class: "req" }, " (required)") : null,
      kind === "json" ? h("span", { class: "help" }, " (JSON)") : null),
    input,
    prop.description ? h("span", { id: helpId, class: "help" }, prop.description) : null,
  );
}

export function skillForm(skill, schema, onSubmit) {
  const properties = schema?.properties || { text: { type: "string", description: "The request, in words.", maxLength: 10000 } };
  return argumentsForm({
    id: `form-${skill.id}`,
    label: `Send a task to ${skill.id}`,
    properties,
    required: new Set(schema ? schema.required || [] : ["text"]),
    button: `Send to ${skill.id}`,
    onSubmit: (args) => onSubmit(skill, args, Boolean(schema)),
  });
}

// A form of `properties` (a JSON Schema's); `onSubmit(args)` may throw: its message is shown.
export function argumentsForm({ id, label, properties, required, button, onSubmit }) {
  const status = h("p", { class: "form-status", role: "status", "aria-live": "polite" });
  const form = h(
    "form",
    { id, class: "skill-form", "aria-label": label, novalidate: false },
    Object.entries(properties).map(([name, prop]) => field(id, name, prop || {}, required.has(name))),
    h("button", { type: "submit" }, button),
    status,
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    let args;
    try {
      args = readArguments(form, properties);
    } catch (error) {
      status.textContent = error.message;
      status.classList.add("error");
      return;
    }
    status.classList.remove("error");
    status.textContent = "Sending…";
    try {
      await onSubmit(args);
      status.textContent = "";
    } catch (error) {
      status.textContent = error.message;
      status.classList.add("error");
    }
  });
  return form;
}

function readArguments(form, properties) {
  const args = {};
  for (const name of Object.keys(properties)) {
    const input = form.elements.namedItem(name);
    if (!input) continue;
    const kind = input.dataset.kind;
    if (kind === "boolean") {
      args[name] = input.checked;
      continue;
    }
    const raw = input.value;
    if (raw === "") continue;
    if (kind === "integer" || kind === "number") args[name] = Number(raw);
    else if (kind === "enum") args[name] = JSON.parse(raw);
    else if (kind === "json") {
      try {
        args[name] = JSON.parse(raw);
      } catch {
        input.focus();
        throw new Error(`${name}: not valid JSON`);
      }
    } else args[name] = raw;
  }
  return args;
}
