from __future__ import annotations

import asyncio
from typing import Any

import pytest

from node.errors import ConfigError, ErrorKind
from node.peers.toolset import PeerToolset
from node.pipeline import PipelineSpec, PipelineTool, pipeline_tool
from node.tooling import Tool, Toolbox, ToolContext, ToolRunner, tool

WAIT = 2.0  # seconds a test waits for something that should happen at once


def make_spec(steps: list[Any], **extra: Any) -> PipelineSpec:
    return PipelineSpec.model_validate(
        {"id": "pipe", "description": "A test pipeline.", "steps": steps, **extra}
    )


async def run(
    pipe: Tool, registry: Toolbox, arguments: Any = None, ctx: ToolContext | None = None
) -> Any:
    return await ToolRunner(registry.extended([pipe])).run_one(pipe.name, arguments, ctx)


def diamond_registry(log: list[str]) -> Toolbox:
    started = {"b": asyncio.Event(), "c": asyncio.Event()}

    @tool(read_only=True)
    async def source(text: str) -> dict[str, Any]:
        """Split a text into words."""
        log.append("a")
        return {"words": text.split(), "count": len(text.split())}

    @tool(read_only=True)
    async def meet(side: str, words: list[str]) -> str:
        """Wait until the other side started too: only possible when both run at once."""
        started[side].set()
        await asyncio.wait_for(started["c" if side == "b" else "b"].wait(), WAIT)
        log.append(side)
        return f"{side}:{'-'.join(words)}"

    @tool
    async def join(left: str, right: str, count: int) -> dict[str, Any]:
        """Join two strings."""
        log.append("d")
        return {"joined": f"{left}|{right}", "count": count}

    return Toolbox([source, meet, join])


DIAMOND = [
    {"id": "a", "tool": "source", "arguments": {"text": "$input/text"}},
    {"id": "b", "tool": "meet", "arguments": {"side": "b", "words": "$steps/a/words"}},
    {"id": "c", "tool": "meet", "arguments": {"side": "c", "words": "$steps/a/words"}},
    {
        "id": "d",
        "tool": "join",
        "arguments": {"left": "$steps/b", "right": "$steps/c", "count": "$steps/a/count"},
    },
]
TEXT_INPUT = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}


async def test_diamond_runs_independent_steps_concurrently_and_in_dependency_order() -> None:
    log: list[str] = []
    registry = diamond_registry(log)
    pipe = pipeline_tool(make_spec(DIAMOND, input_schema=TEXT_INPUT), registry)
    result = await run(pipe, registry, {"text": "x y"})
    assert result.ok, result.error
    assert result.output == {"joined": "b:x-y|c:x-y", "count": 2}
    assert log[0] == "a"
    assert sorted(log[1:3]) == ["b", "c"]
    assert log[3] == "d"


async def test_steps_that_are_not_concurrency_safe_run_alone_in_declaration_order() -> None:
    log: list[str] = []
    running = 0

    @tool
    async def write(name: str) -> str:
        """Append a name (not read-only: never overlaps another call)."""
        nonlocal running
        running += 1
        for _ in range(3):
            await asyncio.sleep(0)
            assert running == 1
        running -= 1
        log.append(name)
        return name

    registry = Toolbox([write])
    steps = [{"id": n, "tool": "write", "arguments": {"name": n}} for n in ("x", "y", "z")]
    result = await run(pipeline_tool(make_spec(steps), registry), registry)
    assert result.output == {"x": "x", "y": "y", "z": "z"}
    assert log == ["x", "y", "z"]


async def test_several_output_steps_give_an_object_keyed_by_step() -> None:
    registry = diamond_registry([])
    pipe = pipeline_tool(make_spec(DIAMOND, output=["b", "a"]), registry)
    result = await run(pipe, registry, {"text": "q"})
    assert result.output == {"b": "b:q", "a": {"words": ["q"], "count": 1}}


async def test_progress_gets_one_message_per_step() -> None:
    messages: list[str] = []

    async def progress(text: str) -> None:
        messages.append(text)

    registry = diamond_registry([])
    pipe = pipeline_tool(make_spec(DIAMOND), registry)
    ctx = ToolContext(progress=progress)
    assert (await run(pipe, registry, {"text": "q"}, ctx)).ok
    assert len(messages) == 4
    assert messages[0] == "step a (source) done (1/4)"
    assert sorted(messages[1:3]) == ["step b (meet) done (2/4)", "step c (meet) done (3/4)"]
    assert messages[3] == "step d (join) done (4/4)"


async def test_a_failing_progress_callback_does_not_fail_the_pipeline() -> None:
    async def progress(text: str) -> None:
        raise RuntimeError("broken callback")

    registry = diamond_registry([])
    pipe = pipeline_tool(make_spec(DIAMOND), registry)
    assert (await run(pipe, registry, {"text": "q"}, ToolContext(progress=progress))).ok


def failing_registry(calls: list[str]) -> Toolbox:
    @tool(read_only=True)
    async def boom() -> str:
        """Always fails."""
        calls.append("boom")
        raise ValueError("kaput")

    @tool(read_only=True)
    async def echo(value: Any = None) -> Any:
        """Return the value."""
        calls.append("echo")
        return value

    return Toolbox([boom, echo])


async def test_on_error_stop_fails_the_pipeline_naming_the_step() -> None:
    calls: list[str] = []
    registry = failing_registry(calls)
    steps = [
        {"id": "first", "tool": "boom"},
        {"id": "after", "tool": "echo", "arguments": {"value": "$steps/first"}},
    ]
    result = await run(pipeline_tool(make_spec(steps), registry), registry)
    assert not result.ok
    assert result.error_kind is ErrorKind.EXECUTION
    assert result.error == "pipeline 'pipe': step 'first' (boom) failed: ValueError: kaput"
    assert calls == ["boom"]


async def test_on_error_continue_records_the_error_and_goes_on() -> None:
    calls: list[str] = []
    registry = failing_registry(calls)
    steps = [
        {"id": "first", "tool": "boom", "on_error": "continue"},
        {"id": "after", "tool": "echo", "arguments": {"value": "$steps/first"}},
    ]
    result = await run(pipeline_tool(make_spec(steps), registry), registry)
    assert result.ok, result.error
    assert result.output == {
        "error": "step 'first' (boom) failed: ValueError: kaput",
        "kind": "execution",
    }
    assert calls == ["boom", "echo"]


async def test_a_missing_reference_fails_the_step_with_its_pointer() -> None:
    registry = failing_registry([])
    steps = [
        {"id": "one", "tool": "echo", "arguments": {"value": {"a": 1}}},
        {"id": "two", "tool": "echo", "arguments": {"value": "$steps/one/b"}},
    ]
    result = await run(pipeline_tool(make_spec(steps), registry), registry)
    assert not result.ok
    assert result.error == (
        "pipeline 'pipe': step 'two': '$steps/one/b' has no value: no member 'b' at /"
    )


async def test_step_arguments_are_validated_against_the_step_tool() -> None:
    @tool(read_only=True)
    async def double(n: int) -> int:
        """Double n."""
        return 2 * n

    registry = Toolbox([double])
    steps = [{"id": "x", "tool": "double", "arguments": {"n": "$input/n"}}]
    pipe = pipeline_tool(make_spec(steps), registry)
    result = await run(pipe, registry, {"n": "21"})  # cast by the step tool's schema
    assert result.output == 42
    bad = await ToolRunner(registry.extended([pipe])).run_one("pipe", {"n": "lots"})
    assert bad.error_kind is ErrorKind.INVALID_ARGUMENTS
    assert bad.error is not None and bad.error.startswith("pipeline 'pipe': step 'x' (double)")


async def test_unknown_local_tool_is_a_config_error_at_build_time() -> None:
    registry = failing_registry([])
    with pytest.raises(ConfigError, match=r"step 'a': unknown tool 'ecko'; did you mean 'echo'\?"):
        pipeline_tool(make_spec([{"id": "a", "tool": "ecko"}]), registry)


async def test_absent_peer_tool_is_a_clear_error_when_its_step_runs() -> None:
    registry = failing_registry([])
    steps = [{"id": "a", "tool": "echo"}, {"id": "b", "tool": "text__keywords", "after": ["a"]}]
    pipe = pipeline_tool(make_spec(steps), registry, PeerToolset())  # peers appear at run time
    result = await run(pipe, registry)
    assert not result.ok
    assert result.error_kind is ErrorKind.PEER
    assert result.error == (
        "pipeline 'pipe': step 'b': peer tool 'text__keywords' is not available "
        "(peer down or not discovered)"
    )


async def test_peer_tool_registered_after_build_is_used() -> None:
    registry = failing_registry([])
    peers = PeerToolset()
    pipe = pipeline_tool(make_spec([{"id": "a", "tool": "text__upper"}]), registry, peers)

    @tool(name="text__upper", read_only=True)
    async def upper(text: str = "hi") -> str:
        """Upper-case a text."""
        return text.upper()

    peers.replace([upper])
    assert (await run(pipe, registry)).output == "HI"


async def test_step_timeout_replaces_the_tool_timeout() -> None:
    @tool(read_only=True)
    async def hang() -> str:
        """Never returns on its own."""
        await asyncio.Event().wait()
        return "never"

    registry = Toolbox([hang])
    steps = [{"id": "h", "tool": "hang", "timeout": 0.05, "on_error": "continue"}]
    result = await run(pipeline_tool(make_spec(steps), registry), registry)
    assert result.output == {
        "error": "step 'h' (hang) failed: hang timed out after 0.05 s",
        "kind": "timeout",
    }


async def test_capabilities_are_checked_for_each_step() -> None:
    @tool(read_only=True, requires=["files"])
    async def secret() -> str:
        """Needs a capability."""
        return "s"

    registry = Toolbox([secret])
    pipe = pipeline_tool(make_spec([{"id": "s", "tool": "secret"}]), registry)
    assert pipe.requires == {"files"}
    runner = ToolRunner(registry.extended([pipe]))
    denied = await runner.run_one("pipe", {}, ToolContext())
    assert denied.error_kind is ErrorKind.CAPABILITY_MISSING
    granted = await runner.run_one("pipe", {}, ToolContext(capabilities=frozenset({"files"})))
    assert granted.output == "s"


def test_the_pipeline_is_a_tool_with_the_spec_and_its_steps_policy() -> None:
    log: list[str] = []
    registry = diamond_registry(log)
    spec = make_spec(DIAMOND, input_schema=TEXT_INPUT, tags=["demo"], requires=["net"], timeout=30)
    pipe = pipeline_tool(spec, registry)
    assert isinstance(pipe, PipelineTool)
    assert (pipe.name, pipe.description, pipe.scope, pipe.policy.timeout) == (
        "pipe",
        "A test pipeline.",
        "public",
        30,
    )
    assert pipe.parameters == TEXT_INPUT
    assert pipe.policy.tags == ("demo",)
    assert pipe.requires == {"net"}
    assert not pipe.read_only  # "join" writes
    definition = next(d for d in registry.extended([pipe]).definitions() if d.name == "pipe")
    assert definition.parameters["required"] == ["text"]

    steps = [DIAMOND[0], {"id": "p", "tool": "x__y"}]
    reader = pipeline_tool(make_spec(steps), registry, PeerToolset())
    assert reader.read_only and reader.concurrency_safe  # peer steps count as read-only


async def test_the_runner_validates_the_pipeline_input_schema() -> None:
    registry = diamond_registry([])
    pipe = pipeline_tool(make_spec(DIAMOND, input_schema=TEXT_INPUT), registry)
    result = await run(pipe, registry, {})
    assert result.error_kind is ErrorKind.INVALID_ARGUMENTS
    assert "text" in (result.error or "")


async def test_pipelines_can_call_pipelines() -> None:
    registry = failing_registry([])
    steps = [{"id": "e", "tool": "echo", "arguments": {"value": "$input/v"}}]
    inner = pipeline_tool(make_spec(steps, id="inner"), registry)
    registry = registry.extended([inner])
    outer = pipeline_tool(
        make_spec([{"id": "i", "tool": "inner", "arguments": {"v": [1, "$$x"]}}]), registry
    )
    assert (await run(outer, registry)).output == [1, "$x"]


async def test_input_schema_defaults_fill_absent_arguments() -> None:
    from node.pipeline import PipelineSpec, pipeline_tool
    from node.tooling import Toolbox, ToolRunner, tool

    @tool(read_only=True)
    def repeat(word: str, times: int) -> str:
        """Repeat a word.

        Args:
            word: The word.
            times: How many times.
        """
        return word * times

    registry = Toolbox([repeat])
    spec = PipelineSpec.model_validate(
        {
            "id": "rep",
            "description": "Repeat with a default count.",
            "input_schema": {
                "type": "object",
                "properties": {
                    "word": {"type": "string"},
                    "times": {"type": "integer", "default": 3},
                },
                "required": ["word"],
            },
            "steps": [
                {
                    "id": "r",
                    "tool": "repeat",
                    "arguments": {"word": "$input/word", "times": "$input/times"},
                }
            ],
        }
    )
    registry = registry.extended([pipeline_tool(spec, registry)])
    result = await ToolRunner(registry).run_one("rep", {"word": "ab"})
    assert result.ok, result.error
    assert result.output == "ababab"


async def test_a_large_structured_step_output_stays_whole_for_later_steps() -> None:
    from node.pipeline import PipelineSpec, pipeline_tool
    from node.tooling import Toolbox, ToolRunner, tool

    @tool(read_only=True, max_output=100)
    def big() -> dict:
        """Return a large object."""
        return {"items": list(range(1000)), "name": "big"}

    @tool(read_only=True)
    def count(items: list[int]) -> int:
        """Count items.

        Args:
            items: The items.
        """
        return len(items)

    registry = Toolbox([big, count])
    spec = PipelineSpec.model_validate(
        {
            "id": "p",
            "description": "Count a big step's items.",
            "steps": [
                {"id": "a", "tool": "big"},
                {"id": "b", "tool": "count", "arguments": {"items": "$steps/a/items"}},
            ],
        }
    )
    registry = registry.extended([pipeline_tool(spec, registry)])
    result = await ToolRunner(registry).run_one("p", {})
    assert result.ok, result.error
    assert result.output == 1000
