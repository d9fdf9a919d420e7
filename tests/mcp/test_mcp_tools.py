"""MCP servers as tool sources: real ``MCPServer``s over stdio and streamable HTTP."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import pytest

from node.card import McpToolRef
from node.errors import ErrorKind
from node.mcp.names import mcp_tool_name
from node.mcp.toolset import McpToolset
from node.tooling import ToolCall, ToolContext, ToolRunner
from node.tooling.guards.urls import UrlGuard
from tests.mcp.conftest import eventually, http_server, processes_with, stdio_server
from tests.mcp.mcp_server import LONG_NAME

LOOPBACK = UrlGuard(allow_cidrs=["127.0.0.0/8"])


async def started(*servers, guard=LOOPBACK, timeout=20.0) -> McpToolset:
    toolset = McpToolset(servers, guard)
    toolset.start()
    await toolset.wait_settled(timeout)
    return toolset


async def run(toolset: McpToolset, name: str, arguments=None, ctx=None, timeout=None):
    runner = ToolRunner(toolset)
    (result,) = await runner.run([ToolCall(name, arguments, timeout=timeout)], ctx or ToolContext())
    return result


@pytest.fixture
async def stdio_tools():
    toolset = await started(stdio_server())
    yield toolset
    await toolset.aclose()


async def test_every_page_of_tools_is_listed_under_safe_names(stdio_tools):
    names = {d.name for d in stdio_tools.definitions()}
    assert {"mcp_t_add", "mcp_t_slow", "mcp_t_boom", "mcp_t_where", "mcp_t_pid"} <= names
    assert len(names) == 8  # three pages of three
    odd = stdio_tools.get(mcp_tool_name("t", "odd.name with/slash"))
    assert odd is not None and odd.original == "odd.name with/slash"
    long = stdio_tools.get(mcp_tool_name("t", LONG_NAME))
    assert long is not None and len(long.name) == 64 and long.original == LONG_NAME
    assert (await run(stdio_tools, odd.name)).output == {"result": "odd"}
    assert (await run(stdio_tools, long.name)).output == {"result": "long"}
    assert all(d.policy.scope == "internal" and d.policy.group == "mcp:t" for d in
               stdio_tools.definitions())  # fmt: skip
    assert stdio_tools.states()["t"] == {"state": "connected", "tools": 8, "connections": 1}


async def test_a_call_returns_structured_content(stdio_tools):
    result = await run(stdio_tools, "mcp_t_add", {"a": "2", "b": 40})  # "2" is cast by the schema
    assert result.ok and result.output == {"result": 42}


async def test_a_tool_error_is_an_error_result_with_the_servers_text(stdio_tools):
    result = await run(stdio_tools, "mcp_t_boom")
    assert not result.ok and result.error_kind == ErrorKind.EXECUTION
    assert "kaboom" in result.error


async def test_a_slow_call_times_out_and_the_session_stays_usable(stdio_tools):
    started_at = time.monotonic()
    result = await run(stdio_tools, "mcp_t_slow", {"seconds": 30}, timeout=0.5)
    assert result.error_kind == ErrorKind.TIMEOUT
    assert time.monotonic() - started_at < 5
    assert (await run(stdio_tools, "mcp_t_add", {"a": 1, "b": 1})).output == {"result": 2}
    assert stdio_tools.states()["t"]["connections"] == 1


async def test_the_task_deadline_bounds_a_call(stdio_tools):
    ctx = ToolContext(deadline=time.time() + 0.5)
    result = await run(stdio_tools, "mcp_t_slow", {"seconds": 30}, ctx=ctx)
    assert result.error_kind == ErrorKind.TIMEOUT


async def test_ref_schemas_are_normalised_and_validated(stdio_tools):
    tool = stdio_tools.get("mcp_t_where")
    point = tool.parameters["properties"]["point"]
    assert point["anyOf"][0] == {"$ref": "#/$defs/Point"} and "Point" in tool.parameters["$defs"]
    ok = await run(stdio_tools, "mcp_t_where", {"point": {"x": "1", "y": 2}, "label": None})
    assert ok.output == {"point": {"x": 1, "y": 2}, "label": None}
    bad = await run(stdio_tools, "mcp_t_where", {"point": {"x": "one", "y": 2}})
    assert bad.error_kind == ErrorKind.INVALID_ARGUMENTS and "point.x" in bad.error


async def test_a_killed_stdio_server_is_restarted_and_the_call_retried(stdio_tools):
    first = (await run(stdio_tools, "mcp_t_pid")).output["result"]
    os.kill(first, signal.SIGKILL)
    result = await run(stdio_tools, "mcp_t_add", {"a": 1, "b": 2})  # finds it dead, reconnects
    assert result.ok and result.output == {"result": 3}
    second = (await run(stdio_tools, "mcp_t_pid")).output["result"]
    assert second != first
    assert stdio_tools.states()["t"]["connections"] == 2


async def test_a_server_that_dies_while_idle_is_noticed_and_reconnected_without_a_call():
    toolset = McpToolset([stdio_server()], LOOPBACK, probe_s=0.2)
    toolset.start()
    try:
        await toolset.wait_settled(20)
        first = (await run(toolset, "mcp_t_pid")).output["result"]
        os.kill(first, signal.SIGKILL)
        await eventually(lambda: toolset.states()["t"]["connections"] == 2, what="a reconnection")
        assert toolset.states()["t"]["state"] == "connected"
        assert (await run(toolset, "mcp_t_pid")).output["result"] != first
    finally:
        await toolset.aclose()


async def test_stdio_servers_get_only_the_environment_they_are_given(monkeypatch):
    monkeypatch.setenv("MCP_TEST_PASSED", "passed")
    monkeypatch.setenv("MCP_TEST_HIDDEN", "hidden")
    server = stdio_server(env={"MCP_TEST_SECRET": "s3cret"}, env_passthrough=["MCP_TEST_PASSED"])
    toolset = await started(server)
    try:
        seen = {
            name: (await run(toolset, "mcp_t_env", {"name": name})).output["result"]
            for name in ("MCP_TEST_SECRET", "MCP_TEST_PASSED", "MCP_TEST_HIDDEN")
        }
    finally:
        await toolset.aclose()
    assert seen == {
        "MCP_TEST_SECRET": "s3cret",
        "MCP_TEST_PASSED": "passed",
        "MCP_TEST_HIDDEN": "<unset>",
    }


async def test_a_server_that_never_answers_is_down_in_bounded_time_and_leaves_no_process():
    marker = f"{time.time_ns() % 10**9}.5"
    never = stdio_server("never", command="sleep", args=[marker], connect_timeout_s=1.0)
    missing = stdio_server("missing", command="/nonexistent/mcp-server", args=[])
    good = stdio_server("good")
    started_at = time.monotonic()
    toolset = await started(never, missing, good)
    try:
        states = toolset.states()
        assert states["good"]["state"] == "connected"  # the others never held it up
        assert (
            states["missing"]["state"] == "down"
            and "FileNotFoundError" in states["missing"]["error"]
        )
        await eventually(lambda: toolset.states()["never"]["state"] == "down", what="never down")
        assert "no answer within 1 s" in toolset.states()["never"]["error"]
        assert time.monotonic() - started_at < 10
        await eventually(lambda: not processes_with(marker), what="the child process gone")
        result = await run(toolset, "mcp_t_add", {"a": 1, "b": 1})
        assert not result.ok and result.error_kind == ErrorKind.NOT_FOUND
    finally:
        await toolset.aclose()
    assert toolset.states()["never"]["state"] == "stopped"
    assert not processes_with(marker)


async def test_closing_the_toolset_stops_the_stdio_process():
    toolset = await started(stdio_server())
    pid = (await run(toolset, "mcp_t_pid")).output["result"]
    await toolset.aclose()
    await eventually(lambda: _exited(pid), what="the process exited")


def _exited(pid: int) -> bool:
    try:
        return "State:\tZ" in Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return True


async def test_enabled_tools_and_per_tool_overrides():
    server = stdio_server(
        enabled_tools=["add", "slow"],
        requires=["math"],
        tools=[McpToolRef(name="add", scope="public", requires=["extra"], timeout=3)],
    )
    toolset = await started(server)
    try:
        assert {d.name for d in toolset.definitions()} == {"mcp_t_add", "mcp_t_slow"}
        add = toolset.get("mcp_t_add").policy
        assert add.scope == "public" and add.timeout == 3 and add.requires == {"math", "extra"}
        assert toolset.get("mcp_t_slow").policy.requires == {"math"}
        denied = await run(toolset, "mcp_t_add", {"a": 1, "b": 1})
        assert denied.error_kind == ErrorKind.CAPABILITY_MISSING
        ctx = ToolContext(capabilities=frozenset({"math", "extra"}))
        assert (await run(toolset, "mcp_t_add", {"a": 1, "b": 1}, ctx=ctx)).ok
    finally:
        await toolset.aclose()


# -- streamable HTTP ----------------------------------------------------------------------


async def test_an_http_server_lists_and_calls(mcp_http):
    toolset = await started(http_server(mcp_http.url))
    try:
        assert len(toolset.definitions()) == 8
        assert (await run(toolset, "mcp_h_add", {"a": 2, "b": 3})).output == {"result": 5}
        assert "kaboom" in (await run(toolset, "mcp_h_boom")).error
    finally:
        await toolset.aclose()


async def test_an_http_call_times_out_and_the_client_survives(mcp_http):
    toolset = await started(http_server(mcp_http.url))
    try:
        slow = await run(toolset, "mcp_h_slow", {"seconds": 30}, timeout=0.5)
        assert slow.error_kind == ErrorKind.TIMEOUT
        assert (await run(toolset, "mcp_h_add", {"a": 1, "b": 2})).output == {"result": 3}
        assert toolset.states()["h"] == {"state": "connected", "tools": 8, "connections": 1}
    finally:
        await toolset.aclose()


async def test_an_http_server_on_a_private_address_needs_an_allowed_cidr(mcp_http):
    toolset = await started(http_server(mcp_http.url), guard=UrlGuard())
    try:
        state = toolset.states()["h"]
        assert state["state"] == "down" and "refused" in state["error"]
        assert len(toolset) == 0
    finally:
        await toolset.aclose()


async def test_an_http_server_that_dies_and_comes_back(mcp_http):
    toolset = await started(http_server(mcp_http.url))
    try:
        assert (await run(toolset, "mcp_h_add", {"a": 1, "b": 1})).ok
        await mcp_http.stop()
        failed = await run(toolset, "mcp_h_add", {"a": 1, "b": 1})
        assert not failed.ok
        await mcp_http.start()  # the same port
        ok = await eventually(
            lambda: _ok(run(toolset, "mcp_h_add", {"a": 2, "b": 2})), what="a call after restart"
        )
        assert ok.output == {"result": 4}
        assert toolset.states()["h"]["state"] == "connected"
    finally:
        await toolset.aclose()


async def _ok(call):
    result = await call
    return result if result.ok else None


async def test_an_unreachable_http_server_never_blocks_the_others(mcp_http):
    port = mcp_http.port
    await mcp_http.stop()
    toolset = await started(http_server(f"http://127.0.0.1:{port}/mcp", "gone"), stdio_server())
    try:
        assert toolset.states()["gone"]["state"] == "down"
        assert toolset.states()["t"]["state"] == "connected"
        result = await run(toolset, "mcp_t_add", {"a": 1, "b": 1})
        assert result.ok
    finally:
        await toolset.aclose()


def test_python_is_the_test_interpreter():
    assert stdio_server().command == sys.executable
