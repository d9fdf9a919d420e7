"""Every code block of the README works as written, run as a new user would run it.

Python blocks run for real (the scripts as subprocesses, on a free port instead of the README's);
``a2a-node`` shell blocks run against real processes; ``# exit N`` after a command is the exit
code it must give (0 otherwise). A block this file does not know fails the first test, so a new
example cannot go unchecked.
"""

from __future__ import annotations

import ast
import asyncio
import os
import re
import shlex
import signal
import socket
import sys
import time
from pathlib import Path

import pytest
import yaml

from node.tooling import Tool, Toolbox, ToolCall, ToolContext, ToolRunner
from tests.cli.clisupport import cli, running
from tests.servers import wait_until_ready

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
BLOCKS = re.findall(r"^```(\w+)\n(.*?)^```$", README, flags=re.MULTILINE | re.DOTALL)


def block(lang: str, containing: str) -> str:
    (found,) = [code for kind, code in BLOCKS if kind == lang and containing in code]
    return found


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def commands(code: str) -> list[tuple[list[str], int]]:
    """The command lines of a shell block, each with the exit code its comment announces."""
    found = []
    for line in code.splitlines():
        if not line.strip():
            continue
        exit_code = re.search(r"#\s*exit (\d+)", line)
        found.append((shlex.split(line, comments=True), int(exit_code[1]) if exit_code else 0))
    return found


def a2a_node_args(argv: list[str]) -> list[str]:
    assert argv[0] in ("a2a-node", ".venv/bin/a2a-node"), argv
    return argv[1:]


def in_a_fresh_directory(tmp_path: Path) -> Path:
    """A working directory like the repository's, as far as the README's paths go."""
    (tmp_path / "cards").symlink_to(ROOT / "cards")
    return tmp_path


BLOCK_TESTS = {
    "./scripts/up": "test_the_quick_start_scripts_exist",
    "a2a-node send http://127.0.0.1:8100": "test_the_second_terminal_commands_run_against_up",
    "tools/greeting.py": "test_the_tool_block_defines_a_working_tool",
    "a2a-node serve cards/data.yaml": "test_the_command_line_block_runs_against_a_real_node",
    "serve_greeter.py": "test_the_python_api_scripts_serve_and_answer",
    "ask_greeter.py": "test_the_python_api_scripts_serve_and_answer",
    "mcp_servers:": "test_the_mcp_servers_block_is_a_valid_card_section",
}


def test_every_code_block_is_checked_here():
    assert len(BLOCKS) == len(BLOCK_TESTS)
    for _, code in BLOCKS:
        covering = [name for marker, name in BLOCK_TESTS.items() if marker in code]
        assert len(covering) == 1, code
        assert covering[0] in globals()


def test_the_quick_start_scripts_exist():
    for argv, _ in commands(block("sh", "./scripts/up")):
        (script,) = argv[:1]
        assert os.access(ROOT / script, os.X_OK), script


async def test_the_tool_block_defines_a_working_tool():
    namespace: dict[str, object] = {}
    exec(compile(block("python", "tools/greeting.py"), "README:greeting", "exec"), namespace)
    greet = namespace["greet"]
    assert isinstance(greet, Tool) and greet.read_only and greet.name == "greet"
    assert greet.parameters["required"] == ["name"]
    runner = ToolRunner(Toolbox([greet]))
    (result,) = await runner.run(
        [ToolCall("greet", {"name": "Ada", "excited": True})], ToolContext()
    )
    assert result.text == "Hello, Ada!"


async def test_the_python_api_scripts_serve_and_answer(tmp_path):
    cwd = in_a_fresh_directory(tmp_path)
    port = str(free_port())
    server_code = block("python", "serve_greeter.py").replace("8200", port)
    client_code = block("python", "ask_greeter.py").replace("8200", port)
    (cwd / "serve_greeter.py").write_text(server_code, encoding="utf-8")
    (cwd / "ask_greeter.py").write_text(client_code, encoding="utf-8")
    expected = [
        ast.literal_eval(comment)
        for comment in re.findall(r"print\(.*\)\s+#\s*(.+)$", client_code, flags=re.MULTILINE)
    ]
    assert expected  # the block says what it prints
    server = await asyncio.create_subprocess_exec(
        sys.executable,
        "serve_greeter.py",
        cwd=cwd,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        await wait_until_ready(f"http://127.0.0.1:{port}", "/readyz", timeout=30)
        client = await asyncio.create_subprocess_exec(
            sys.executable, "ask_greeter.py", cwd=cwd, stdout=asyncio.subprocess.PIPE
        )
        out, _ = await asyncio.wait_for(client.communicate(), timeout=60)
        assert client.returncode == 0
        printed = [ast.literal_eval(line) for line in out.decode().splitlines()]
        assert printed == expected
    finally:
        server.send_signal(signal.SIGINT)
        _, err = await asyncio.wait_for(server.communicate(), timeout=15)
    assert b"Traceback" not in err, err.decode()


async def test_the_command_line_block_runs_against_a_real_node(tmp_path):
    cwd = in_a_fresh_directory(tmp_path)
    port = str(free_port())
    (serve_line, _), *lines = commands(block("sh", "a2a-node serve cards/data.yaml"))
    async with running(*a2a_node_args(serve_line), "--port", port, cwd=cwd) as node:
        await node.wait_for_line(f"http://127.0.0.1:{port}")
        task_id = ""
        for argv, expected in lines:
            args = [
                a.replace("8103", port).replace("TASK_ID", task_id) for a in a2a_node_args(argv)
            ]
            code, out, err = await cli(*args, cwd=cwd)
            assert code == expected, f"{shlex.join(argv)}\n{out}{err}"
            if waiting := re.search(r"task (\S+): input_required", err):
                task_id = waiting[1]


@pytest.mark.network
async def test_the_second_terminal_commands_run_against_up(tmp_path):
    """``./scripts/up`` runs ``a2a-node up``; the README's next commands are then run against it
    (its network file with free ports instead of the fixed ones, which may be taken here)."""
    spec = yaml.safe_load((ROOT / "deploy" / "local.yaml").read_text(encoding="utf-8"))
    ports: dict[str, str] = {}

    def move(section: dict[str, object]) -> None:
        new = free_port()
        ports[str(section["port"])] = str(new)
        section["port"] = new

    move(spec["registry"])
    move(spec["site"])
    spec["site"]["dir"] = str(ROOT / "deploy" / spec["site"]["dir"])
    for node in spec["nodes"]:
        move(node)
        node["card"] = str((ROOT / "deploy" / node["card"]).resolve())
    spec_path = tmp_path / "local.yaml"
    spec_path.write_text(yaml.safe_dump(spec), encoding="utf-8")

    async with running("up", str(spec_path), "--run-dir", str(tmp_path / "run")) as up:
        await up.wait_for_line("Ctrl-C stops every process", timeout=90)
        for argv, expected in commands(block("sh", "a2a-node send http://127.0.0.1:8100")):
            args = a2a_node_args(argv)
            for old, new in ports.items():
                args = [a.replace(f":{old}", f":{new}") for a in args]
            deadline = time.monotonic() + 60
            while (
                True
            ):  # nodes find their peers by polling the registry (refresh_s), as up's --demo
                code, out, err = await cli(*args, timeout=90)
                if "is not available" not in out + err or time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.5)
            assert code == expected, f"{shlex.join(argv)}\n{out}{err}"
            assert out.strip()


def test_the_mcp_servers_block_is_a_valid_card_section() -> None:
    from node.card import parse_card

    section = yaml.safe_load(block("yaml", "mcp_servers:"))
    card = parse_card(
        {"id": "m", "name": "m", "description": "d", **section}, env={"SEARCH_TOKEN": "t"}
    )
    assert [s.name for s in card.mcp_servers] == ["units", "search"]
    assert card.mcp_servers[0].tools[0].scope == "public"
