from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from node.errors import ConfigError, ErrorKind, InvalidArguments, ToolError
from node.tooling import Toolbox, ToolContext, ToolRunner
from node.tooling.declared import CommandTool, HttpTool, declared_tool
from node.tooling.guards.urls import UrlGuard

PY = sys.executable
PRINT_ARGV = "import json, sys; print(json.dumps(sys.argv[1:]))"
PARAMS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "a": {"type": "string"},
        "n": {"type": "integer", "default": 3},
        "flag": {"type": "boolean"},
        "opt": {"type": "string"},
    },
    "required": ["a"],
    "additionalProperties": False,
}


def command(*argv: str, **policy: Any) -> CommandTool:
    spec = {"name": "cmd", "description": "A command.", "parameters": PARAMS, "command": list(argv)}
    made = declared_tool({**spec, **policy})
    assert isinstance(made, CommandTool)
    return made


async def run_argv(tool: CommandTool, arguments: dict[str, Any]) -> list[str]:
    output = await tool.execute(arguments, ToolContext())
    return list(json.loads(output))


async def test_command_substitutes_each_element_without_a_shell() -> None:
    tool = command(PY, "-c", PRINT_ARGV, "--n={n}", "{a}", "{flag}", "{opt}")
    argv = await run_argv(tool, {"a": "$(rm -rf /); echo *", "flag": True})
    assert argv == ["--n=3", "$(rm -rf /); echo *", "true"]  # {opt} absent: dropped


async def test_command_refuses_option_injection_before_double_dash() -> None:
    tool = command(PY, "-c", PRINT_ARGV, "{a}")
    with pytest.raises(InvalidArguments, match="a must not start with '-'"):
        tool.command_line({"a": "--output=/etc/passwd"})
    after = command(PY, "-c", PRINT_ARGV, "--", "{a}")
    assert await run_argv(after, {"a": "-x"}) == ["--", "-x"]


async def test_command_nonzero_exit_is_a_tool_error_with_stderr_tail() -> None:
    tool = command(PY, "-c", "import sys; sys.stderr.write('x' * 2000 + 'bad input'); sys.exit(3)")
    with pytest.raises(ToolError, match=r"exited with status 3: x+bad input$") as info:
        await tool.execute({"a": "1"}, ToolContext())
    assert len(str(info.value)) < 600


async def test_command_gets_a_minimal_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SECRET_TOKEN", "s3cr3t")
    tool = command(PY, "-c", "import json, os; print(json.dumps(sorted(os.environ)))")
    names = json.loads(await tool.execute({"a": "1"}, ToolContext()))
    assert "SECRET_TOKEN" not in names
    assert set(names) <= {"PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR", "LC_CTYPE"}


async def test_command_output_is_bounded() -> None:
    tool = command(PY, "-c", "print('y' * 100000)", max_output=100)
    output = await tool.execute({"a": "1"}, ToolContext())
    assert output.endswith("[stdout cut at 400 bytes]")
    assert output.startswith("y" * 400)


async def test_command_timeout_kills_the_process(tmp_path: Any) -> None:
    marker = tmp_path / "pid"
    script = f"import os, time; open({str(marker)!r}, 'w').write(str(os.getpid())); time.sleep(30)"
    tool = command(PY, "-c", script, timeout=0.5)
    result = await ToolRunner(Toolbox([tool])).run_one("cmd", {"a": "1"})
    assert result.error_kind is ErrorKind.TIMEOUT
    pid = int(marker.read_text())
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        await asyncio.sleep(0.01)
    else:
        pytest.fail("the timed-out process is still running")


async def test_command_that_cannot_start_is_a_tool_error() -> None:
    tool = command("/nonexistent/program-xyz")
    with pytest.raises(ToolError, match="cannot start"):
        await tool.execute({"a": "1"}, ToolContext())


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"command": ["{a}"]}, "program itself"),
        ({"command": ["echo", "{missing}"]}, "not a parameter"),
        ({"command": ["echo", "{a!r}"]}, "plain"),
        ({"command": ["echo", "{a.__class__}"]}, "plain"),
        ({"command": []}, "non-empty"),
        ({"command": ["echo"], "http": {"url": "http://x"}}, "exactly one"),
        ({"command": ["echo"], "shell": True}, "unknown fields"),
        ({"http": {"url": "http://x/{nope}"}}, "not a parameter"),
        ({"http": {"url": "http://x", "verify": False}}, "unknown http fields"),
        ({"command": ["echo"], "name": "bad name"}, "must match"),
    ],
)
def test_bad_specs_are_config_errors(spec: dict[str, Any], message: str) -> None:
    base = {"name": "t", "description": "d", "parameters": PARAMS}
    with pytest.raises(ConfigError, match=message):
        declared_tool({**base, **spec})


def test_policy_fields_come_from_the_spec() -> None:
    tool = command(
        "echo",
        read_only=True,
        timeout=5,
        max_output=10,
        requires=["shell"],
        cost=0.1,
        scope="internal",
        tags=["t"],
        examples=["e"],
    )
    assert tool.concurrency_safe
    policy = tool.policy
    assert (policy.timeout, policy.max_output, policy.cost, policy.scope) == (
        5,
        10,
        0.1,
        "internal",
    )
    assert policy.requires == frozenset({"shell"})
    assert (policy.tags, policy.examples) == (("t",), ("e",))


# -- http ------------------------------------------------------------------------------------

seen: list[httpx.Request] = []


def handler(request: httpx.Request) -> httpx.Response:
    seen.append(request)
    if request.url.path.endswith("/missing"):
        return httpx.Response(404, text="no such item")
    if request.url.path.endswith("/text"):
        return httpx.Response(200, text="plain words")
    body = json.loads(request.content) if request.content else None
    path = request.url.raw_path.decode().split("?")[0]
    return httpx.Response(200, json={"path": path, "body": body})


@pytest.fixture
async def ctx() -> AsyncIterator[ToolContext]:
    seen.clear()
    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        yield ToolContext(url_guard=UrlGuard(allow_cidrs=["127.0.0.0/8"]), http=client)


def http_tool(method: str, url: str) -> HttpTool:
    spec = {
        "name": "api",
        "description": "An API.",
        "parameters": PARAMS,
        "http": {"method": method, "url": url, "headers": {"x-client": "node"}},
    }
    made = declared_tool(spec)
    assert isinstance(made, HttpTool)
    return made


async def test_http_get_encodes_the_path_and_sends_the_rest_as_query(ctx: ToolContext) -> None:
    tool = http_tool("get", "http://127.0.0.1:9/items/{a}")
    result = await tool.execute({"a": "x/../y z", "flag": False, "opt": "v"}, ctx)
    assert result["path"] == "/items/x%2F..%2Fy%20z"
    request = seen[-1]
    assert request.method == "GET"
    assert dict(request.url.params) == {"flag": "false", "opt": "v"}
    assert request.headers["x-client"] == "node"


async def test_http_post_sends_the_rest_as_json(ctx: ToolContext) -> None:
    tool = http_tool("POST", "http://127.0.0.1:9/items/{a}")
    result = await tool.execute({"a": "1", "n": 5}, ctx)
    assert result == {"path": "/items/1", "body": {"n": 5}}


async def test_http_text_and_errors(ctx: ToolContext) -> None:
    assert await http_tool("GET", "http://127.0.0.1:9/text").execute({"a": "1"}, ctx) == (
        "plain words"
    )
    with pytest.raises(ToolError, match="HTTP 404: no such item"):
        await http_tool("GET", "http://127.0.0.1:9/{a}").execute({"a": "missing"}, ctx)


async def test_http_goes_through_the_url_guard() -> None:
    tool = http_tool("GET", "http://127.0.0.1:9/{a}")
    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        guarded = ToolContext(url_guard=UrlGuard(), http=client)
        result = await ToolRunner(Toolbox([tool])).run_one("api", {"a": "x"}, guarded)
    assert result.error_kind is ErrorKind.GUARD


async def test_http_without_a_client_is_a_tool_error() -> None:
    with pytest.raises(ToolError, match="outbound HTTP"):
        await http_tool("GET", "http://127.0.0.1:9/{a}").execute({"a": "x"}, ToolContext())
