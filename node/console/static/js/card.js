// An agent card: identity, interfaces, and its skills with their input schemas.

import { h, tree } from "./dom.js";

export const SKILL_SCHEMAS = "urn:a2a-node:ext:skill-schemas:v1";

export function skillSchemas(card) {
  const extensions = card?.capabilities?.extensions || [];
  const found = extensions.find((e) => e.uri === SKILL_SCHEMAS);
  const schemas = found?.params?.schemas;
  return schemas && typeof schemas === "object" ? schemas : {};
}

export function cardSummary(card) {
  const interfaces = card.supportedInterfaces || [];
  return h(
    "dl",
    { class: "facts" },
    h("dt", {}, "Description"),
    h("dd", {}, card.description || "—"),
    h("dt", {}, "Version"),
    h("dd", {}, card.version || "—"),
    card.provider ? [h("dt", {}, "Provider"), h("dd", {}, card.provider.organization || "")] : null,
    h("dt", {}, "Interfaces"),
    h(
      "dd",
      {},
      interfaces.length
        ? h("ul", { class: "plain" }, interfaces.map((i) => h("li", {}, `${i.protocolBinding} ${i.protocolVersion || ""} `, h("code", {}, i.url))))
        : "—",
    ),
    h("dt", {}, "Streaming"),
    h("dd", {}, card.capabilities?.streaming ? "yes" : "no"),
  );
}

// One skill's description; `extra(skill, schema)` adds content (a form) to its section.
export function skillSection(skill, schema, extra = null) {
  const id = `skill-${skill.id}`;
  return h(
    "section",
    { class: "skill", "aria-labelledby": id },
    h("h3", { id }, skill.name && skill.name !== skill.id ? `${skill.name} ` : "", h("code", {}, skill.id)),
    h("p", {}, skill.description || ""),
    skill.tags?.length ? h("p", { class: "tags" }, "Tags: ", skill.tags.map((t) => h("span", { class: "tag" }, t))) : null,
    skill.examples?.length
      ? h("details", {}, h("summary", {}, `Examples (${skill.examples.length})`), h("ul", {}, skill.examples.map((e) => h("li", {}, e))))
      : null,
    schema
      ? h("details", { class: "schema" }, h("summary", {}, "Input schema"), tree(schema))
      : h("p", { class: "help" }, "No input schema published: the skill takes text."),
    extra ? extra(skill, schema) : null,
  );
}
