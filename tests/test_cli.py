"""The a2a-node command line: its parser, its error handling, and the basics run as a subprocess.

Command families have their own tests in ``tests/cli/`` (send/get, card/tools, serve).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

import pytest

from node.card import load_card
from node.cli import build_parser, parse, run
from node.errors import ConfigError, NodeError
from node.server.app import build_node_app
from tests.cli.clisupport import DATA_CARD, cli


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    (action,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_every_option_and_argument_of_every_command_has_help():
    parser = build_parser()
    missing = [
        f"{name} {action.dest}"
        for name, sub in {"": parser, **_subparsers(parser)}.items()
        for action in sub._actions
        if not isinstance(action, argparse._HelpAction | argparse._SubParsersAction)
        and not action.help
    ]
    assert missing == []


def test_send_text_may_follow_the_options():
    args = parse(["send", "http://n", "--skill", "shout", "hello"])
    assert (args.url, args.skill, args.text) == ("http://n", "shout", "hello")
    assert parse(["send", "http://n", "hello", "--skill", "shout"]).text == "hello"


def test_extra_words_elsewhere_are_still_refused(capsys: pytest.CaptureFixture[str]):
    with pytest.raises(SystemExit) as exited:
        parse(["get", "http://n", "task-1", "extra"])
    assert exited.value.code == 2
    assert "unrecognized arguments: extra" in capsys.readouterr().err


def test_known_errors_are_one_line_and_bugs_keep_their_traceback(
    capsys: pytest.CaptureFixture[str],
):
    def refuse(_: argparse.Namespace) -> int:
        raise ConfigError("card 'x': unknown tool 'y'")

    def fail(_: argparse.Namespace) -> int:
        raise NodeError("the node went away")

    def bug(_: argparse.Namespace) -> int:
        raise KeyError("a bug")

    assert run(argparse.Namespace(log_level="warning", run=refuse)) == 2
    assert capsys.readouterr().err == "a2a-node: card 'x': unknown tool 'y'\n"
    assert run(argparse.Namespace(log_level="warning", run=fail)) == 1
    with pytest.raises(KeyError, match="a bug"):  # the interpreter prints the traceback
        run(argparse.Namespace(log_level="warning", run=bug))


async def test_debug_logging_shows_the_traceback_of_a_known_error(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("id: x\n")
    code, _, err = await cli("card", str(bad), "--check")
    assert code == 2 and err.startswith("a2a-node: ") and "Traceback" not in err
    code, _, err = await cli("--log-level", "debug", "card", str(bad), "--check")
    assert code == 2 and "Traceback" in err and "ConfigError" in err


async def test_the_console_script_runs():
    script = Path(sys.executable).with_name("a2a-node")
    proc = await asyncio.create_subprocess_exec(
        str(script), "--help", stdout=asyncio.subprocess.PIPE
    )
    out, _ = await proc.communicate()
    assert proc.returncode == 0 and b"send" in out and b"serve" in out


async def test_tools_lists_a_cards_tools_with_their_policy(tmp_path):
    code, out, _ = await cli("tools", DATA_CARD, "--data-dir", str(tmp_path))
    assert code == 0
    assert "calculate  [public read-only]" in out
    assert "json_query" in out and "number_stats" in out


async def test_call_runs_a_tool_locally_and_reports_errors(tmp_path):
    code, out, _ = await cli(
        "call", DATA_CARD, "calculate", "--arg", "expression=2*21", "--data-dir", str(tmp_path)
    )
    assert (code, out.strip()) == (0, "42")
    code, out, _ = await cli(
        "call",
        DATA_CARD,
        "calculate",
        "--data",
        '{"expression": "6*7"}',
        "--data-dir",
        str(tmp_path),
    )
    assert (code, out.strip()) == (0, "42")
    code, _, err = await cli(
        "call", DATA_CARD, "calculate", "--arg", "expression=1/0", "--data-dir", str(tmp_path)
    )
    assert code == 1 and "error (execution)" in err and "zero" in err.lower()
    code, _, err = await cli("call", DATA_CARD, "calculat", "--data-dir", str(tmp_path))
    assert code == 1 and "not_found" in err and "calculate" in err


async def test_card_prints_the_agent_card_and_checks_files(tmp_path):
    code, out, _ = await cli("card", DATA_CARD, "--data-dir", str(tmp_path))
    assert code == 0
    card = json.loads(out)
    assert card["name"] == "Data Node"
    assert {s["id"] for s in card["skills"]} == {"calculate", "json_query", "number_stats"}
    bad = tmp_path / "bad.yaml"
    bad.write_text("id: x\n")
    code, _, err = await cli("card", str(bad), "--check")
    assert code == 2
    assert err.startswith("a2a-node: ") and "name: Field required" in err
    assert "Traceback" not in err


async def test_serve_refuses_a_public_bind_without_auth():
    code, _, err = await cli("serve", DATA_CARD, "--host", "0.0.0.0", "--port", "1")
    assert code == 2 and "--insecure" in err


async def test_send_get_and_errors_against_a_running_node(serve, tmp_path):
    card = load_card(DATA_CARD)
    url = await serve(
        lambda u: build_node_app(card, public_url=u, data_dir=tmp_path, store="memory")
    )
    code, out, err = await cli("send", url, "--skill", "calculate", "--arg", "expression=6*7")
    assert code == 0, err
    assert "--- calculate\n42" in out
    assert "completed" in err and "… working" in err
    code, out, err = await cli("send", url, "1 + 1", "--skill", "calculate", "--poll")
    assert code == 0 and "--- calculate\n2" in out
    code, out, _ = await cli(
        "send", url, "--skill", "calculate", "--arg", "expression=1", "--no-wait"
    )
    task_id = out.strip()
    assert code == 0 and task_id
    code, out, err = await cli("get", url, task_id)
    assert code == 0 or "working" in err
    code, _, err = await cli("send", url, "--skill", "nope")
    assert code == 1 and "rejected" in err and "unknown skill" in err
