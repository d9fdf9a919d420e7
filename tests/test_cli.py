"""The a2a-node command line, run as a real subprocess."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from node.config import load_card
from node.server.app import build_node_app

ROOT = Path(__file__).resolve().parent.parent
DATA_CARD = str(ROOT / "cards" / "data.yaml")


async def cli(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "node.cli",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


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
    assert code == 1
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
    assert "completed" in err and "calling calculate" in err
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
    code, _, err = await cli("send", "http://127.0.0.1:9", "hi")
    assert code == 1 and err.startswith("a2a-node: ") and "Traceback" not in err
