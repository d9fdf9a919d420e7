"""Pipeline skills as a card declares them: steps over local or peer tools, wired by references.

A pipeline becomes one tool (see :mod:`node.pipeline.tool`)::

    pipelines:
      - id: page_keywords
        description: Fetch a web page and extract its keywords.
        input_schema:
          type: object
          properties:
            url: {type: string}
            top: {type: integer, default: 5}
          required: [url]
        steps:
          - id: fetch
            tool: web__http_fetch              # a peer's skill: "<peer_id>__<skill_id>"
            arguments: {url: $input/url}
          - id: keywords
            tool: text__keywords
            arguments: {text: $steps/fetch/text, top: $input/top}
            on_error: stop                     # or "continue": record {error, kind}, go on
            timeout: 20                        # replaces the tool's own timeout for this step
        output: [keywords]                     # default: the steps no other step depends on
        timeout: 120                           # the whole pipeline, in seconds

References (``$input/...``, ``$steps/<id>/...``) are described in :mod:`node.pipeline.refs`.
Validation happens when the card loads: unique step ids, well-formed references to known steps,
no dependency cycles, output steps that exist.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from node.errors import ConfigError
from node.pipeline.refs import STEP_ID_PATTERN, compile_arguments, references
from node.tooling.schema import compile_schema
from node.tooling.tool import TOOL_NAME_PATTERN, Scope

__all__ = ["MAX_STEPS", "PipelineSpec", "StepSpec"]

MAX_STEPS = 100


class StepSpec(BaseModel):
    """One call of one tool (named exactly, local or ``<peer_id>__<skill_id>``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(pattern=STEP_ID_PATTERN.pattern)
    tool: str = Field(pattern=TOOL_NAME_PATTERN.pattern)
    arguments: dict[str, Any] = Field(default_factory=dict)
    after: list[str] = Field(default_factory=list, description="Extra steps to wait for.")
    on_error: Literal["stop", "continue"] = "stop"
    timeout: float | None = Field(default=None, gt=0, description="Replaces the tool's timeout.")

    @field_validator("arguments")
    @classmethod
    def _well_formed(cls, arguments: dict[str, Any]) -> dict[str, Any]:
        compile_arguments(arguments)  # raises ValueError on a malformed reference
        return arguments

    def template(self) -> dict[str, Any]:
        """The arguments with references parsed (see :func:`node.pipeline.refs.resolve`)."""
        template: dict[str, Any] = compile_arguments(self.arguments)
        return template

    def dependencies(self) -> tuple[str, ...]:
        """The steps this one waits for: those it references, then ``after``, without repeats."""
        named = [r.step for r in references(self.template()) if r.step is not None]
        return tuple(dict.fromkeys([*named, *self.after]))


class PipelineSpec(BaseModel):
    """A skill made of steps; its id is the tool's (and the skill's) name."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(pattern=TOOL_NAME_PATTERN.pattern)
    description: str = Field(min_length=1)
    input_schema: dict[str, Any] = Field(
        default_factory=lambda: {"type": "object", "properties": {}}
    )
    steps: list[StepSpec] = Field(min_length=1, max_length=MAX_STEPS)
    output: list[str] | None = Field(
        default=None, min_length=1, description="Steps whose outputs form the result."
    )
    tags: list[str] = Field(default_factory=list)
    examples: list[str] = Field(default_factory=list)
    scope: Scope = "public"
    requires: list[str] = Field(default_factory=list)
    timeout: float = Field(default=120.0, gt=0, description="Seconds for the whole pipeline.")

    @field_validator("input_schema")
    @classmethod
    def _object_schema(cls, schema: dict[str, Any]) -> dict[str, Any]:
        if schema.get("type") != "object":
            raise ValueError("input_schema must be a JSON Schema with type: object")
        try:
            compile_schema(schema)
        except ConfigError as exc:
            raise ValueError(f"input_schema: {exc}") from None
        return schema

    @model_validator(mode="after")
    def _valid_graph(self) -> PipelineSpec:
        ids = [step.id for step in self.steps]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise ValueError(f"pipeline {self.id!r}: duplicate step ids: {', '.join(dupes)}")
        graph = {step.id: step.dependencies() for step in self.steps}
        for step_id, deps in graph.items():
            for dep in deps:
                if dep not in graph:
                    raise ValueError(
                        f"pipeline {self.id!r}: step {step_id!r} refers to unknown step {dep!r} "
                        f"(steps: {', '.join(ids)})"
                    )
        cycle = _find_cycle(graph)
        if cycle:
            raise ValueError(
                f"pipeline {self.id!r}: steps depend on each other: {' → '.join(cycle)}"
            )
        for out in self.output or ():
            if out not in graph:
                raise ValueError(f"pipeline {self.id!r}: output names unknown step {out!r}")
        return self

    def output_steps(self) -> tuple[str, ...]:
        """``output``, or by default the steps no other step depends on (declaration order)."""
        if self.output:
            return tuple(dict.fromkeys(self.output))
        needed = {dep for step in self.steps for dep in step.dependencies()}
        return tuple(step.id for step in self.steps if step.id not in needed)


def _find_cycle(graph: dict[str, tuple[str, ...]]) -> list[str] | None:
    """A dependency cycle as a path (``[a, b, a]``), or ``None``."""
    state: dict[str, int] = {}  # 1: on the current path, 2: finished
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for dep in graph[node]:
            if state.get(dep) == 1:
                return [*path[path.index(dep) :], dep]
            if dep not in state and (found := visit(dep)):
                return found
        path.pop()
        state[node] = 2
        return None

    for node in graph:
        if node not in state and (found := visit(node)):
            return found
    return None
