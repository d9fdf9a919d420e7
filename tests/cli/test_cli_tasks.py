"""``a2a-node send`` and ``get`` as a new user meets them: a real CLI process, a real node."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from node.card import load_card, parse_card
from node.registry import RegistrySettings
from node.registry.app import build_registry_app
from node.server.app import build_node_app
from node.tooling import tool
from tests.cli.clisupport import DATA_CARD, cli


@tool(read_only=True)
async def nap(seconds: float) -> str:
    """Sleep, then say so.

    Args:
        seconds: How long to sleep.
    """
    await asyncio.sleep(seconds)
    return f"slept {seconds:g}s"


@pytest.fixture
async def data_node(serve, tmp_path: Path) -> str:
    """The data card's node, plus ``nap``, on a free loopback port."""
    card = load_card(DATA_CARD)
    return str(
        await serve(
            lambda u: build_node_app(
                card, public_url=u, data_dir=tmp_path, store="memory", tools=[nap]
            )
        )
    )


def batch(*expressions: str) -> str:
    calls = [{"skill": "calculate", "arguments": {"expression": e}} for e in expressions]
    return json.dumps({"calls": calls})


async def test_a_batch_calling_one_skill_twice_prints_both_results_in_order(data_node):
    code, out, err = await cli("send", data_node, "--data", batch("1+1", "2+2"))
    assert code == 0, err
    assert out == "--- calculate\n2\n--- calculate\n4\n"
    code, out, _ = await cli("send", data_node, "--data", batch("1+1", "2+2"), "--json")
    assert code == 0
    assert json.loads(out)["artifacts"] == [
        {"name": "calculate", "values": [2]},
        {"name": "calculate", "values": [4]},
    ]


async def test_send_task_replies_to_a_task_waiting_for_input(data_node):
    code, out, err = await cli("send", data_node, "--skill", "calculate", "--json")
    waiting = json.loads(out)
    assert (code, waiting["state"]) == (1, "input_required"), err
    schema = waiting["status_data"][0]["schema"]["properties"]["expression"]
    assert schema["maxLength"] == 1000 and isinstance(schema["maxLength"], int)  # not 1000.0

    code, out, err = await cli(
        "send", data_node, "--task", waiting["id"], "--arg", "expression=6*7"
    )
    assert (code, out) == (0, "--- calculate\n42\n"), err

    code, out, err = await cli("send", data_node, "--skill", "calculate")
    assert code == 1 and "input_required" in err
    assert "reply with: a2a-node send" in err and "--arg expression=" in err
    task_id = err.split("task ", 1)[1].split(":", 1)[0]
    context_id = json.loads((await cli("get", data_node, task_id, "--json"))[1])["context_id"]
    code, out, err = await cli(
        "send", data_node, "2 ** 10", "--task", task_id, "--context", context_id
    )
    assert (code, out) == (0, "--- calculate\n1024\n"), err


async def test_send_prints_the_registrys_message_answer(serve, tmp_path):
    registry = await serve(
        lambda u: build_registry_app(RegistrySettings(public_url=u, db=str(tmp_path / "r.db")))
    )
    code, out, err = await cli("send", registry, "--skill", "find_agents")
    assert code == 0, err
    assert "unspecified" not in err and "message" in err
    assert json.loads(out) == {"agents": [], "next_page_token": None}
    code, out, err = await cli("send", registry, "--skill", "find_agents", "--arg", "limit=0")
    assert code == 1 and json.loads(out)["error"]["code"] == "bad_request"
    code, out, _ = await cli("send", registry, "--skill", "find_agents", "--json")
    assert json.loads(out)["kind"] == "message"


async def test_send_takes_the_text_before_or_after_the_options(data_node):
    code, out, err = await cli("send", data_node, "--skill", "calculate", "1 + 2")
    assert (code, out) == (0, "--- calculate\n3\n"), err
    code, out, err = await cli("send", data_node, "2 + 2", "--skill", "calculate")
    assert (code, out) == (0, "--- calculate\n4\n"), err
    code, _, err = await cli("send", data_node, "--skill", "calculate", "1", "2")
    assert code == 2 and "give TEXT once" in err


async def test_send_timeout_bounds_the_whole_stream(data_node):
    started = time.monotonic()
    code, _, err = await cli(
        "send", data_node, "--skill", "nap", "--arg", "seconds=30", "--timeout", "1"
    )
    assert time.monotonic() - started < 20  # not the task's 30 s (room for a slow CLI start)
    assert code == 1 and "gave up after 1s" in err and "a2a-node get" in err
    code, _, err = await cli(
        "send", data_node, "--skill", "nap", "--arg", "seconds=30", "--timeout", "1", "--poll"
    )
    assert code == 1 and "gave up after 1s" in err


async def test_send_and_get_take_the_card_url_that_agents_prints(data_node):
    card_url = f"{data_node}/.well-known/agent-card.json"
    code, out, err = await cli("send", card_url, "--skill", "calculate", "--arg", "expression=6*7")
    assert (code, out) == (0, "--- calculate\n42\n"), err
    task_id = err.split("task ", 1)[1].split(":", 1)[0]
    code, out, _ = await cli("get", card_url, task_id, "--json")
    assert code == 0 and json.loads(out)["state"] == "completed"


async def test_send_and_get_print_json_for_scripts(data_node):
    code, out, err = await cli(
        "send", data_node, "--skill", "number_stats", "--arg", "numbers=[1,2,3]", "--json"
    )
    assert code == 0 and err == ""  # no progress lines around the document
    sent = json.loads(out)
    assert sent["state"] == "completed"
    (artifact,) = sent["artifacts"]
    assert artifact["values"][0]["count"] == 3 and "3.0" not in out
    code, out, _ = await cli("get", data_node, sent["id"], "--json")
    assert code == 0 and json.loads(out)["artifacts"] == sent["artifacts"]
    code, out, _ = await cli("send", data_node, "--skill", "calculate", "--no-wait", "--json")
    assert code == 0 and json.loads(out)["id"]


async def test_a_batch_with_a_call_over_the_budget_exits_3_naming_it(serve, tmp_path):
    card = parse_card(
        {
            "id": "budget",
            "name": "Budget Node",
            "description": "calculate costs 1; a task may spend 1.5",
            "tools": [{"name": "calculate", "cost": 1}],
            "limits": {"task_cost_budget": 1.5},
        }
    )
    url = await serve(
        lambda u: build_node_app(card, public_url=u, data_dir=tmp_path, store="memory")
    )
    code, out, err = await cli("send", url, "--data", batch("1+1", "2+2"))
    assert code == 3, err
    assert "--- calculate\n2\n" in out
    assert "partial: the task completed but 1 call failed" in err
    assert "calculate (budget_exceeded): cost budget exceeded" in err
    code, out, _ = await cli("send", url, "--data", batch("1+1", "2+2"), "--json")
    assert code == 3
    assert [f["kind"] for f in json.loads(out)["failed_calls"]] == ["budget_exceeded"]


async def test_a_node_that_cannot_be_reached_is_one_line(tmp_path):
    code, _, err = await cli("send", "http://127.0.0.1:9", "hi")
    assert code == 1 and err.startswith("a2a-node: ") and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


async def test_the_python_client_keeps_every_result_and_whole_numbers(data_node):
    from a2a.types import Message

    from node.client import NodeClient, artifacts_of, data_message

    async with NodeClient.connect(f"{data_node}/.well-known/agent-card.json") as node:
        task = await node.send(data_message(json.loads(batch("1+1", "2+2"))))
        assert artifacts_of(task) == {"calculate": [2, 4]}
        max_length = node.skill_schemas()["calculate"]["properties"]["expression"]["maxLength"]
        assert (max_length, type(max_length)) == (1000, int)
        answer = await node.reply(data_message(json.loads(batch("6*7"))))
        assert not isinstance(answer, Message) and artifacts_of(answer) == {"calculate": [42]}


async def test_the_python_client_returns_a_message_answer_from_reply(serve, tmp_path):
    from a2a.types import Message

    from node.client import NodeClient, skill_message
    from node.errors import PeerError

    registry = await serve(
        lambda u: build_registry_app(RegistrySettings(public_url=u, db=str(tmp_path / "r.db")))
    )
    async with NodeClient.connect(registry) as node:
        answer = await node.reply(skill_message("find_agents"))
        assert isinstance(answer, Message)
        with pytest.raises(PeerError, match="answered with a message"):
            await node.send(skill_message("find_agents"))
