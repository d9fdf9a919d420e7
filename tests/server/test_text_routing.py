"""Text from generic clients, end to end through a node with the official client.

Each routing rule (docs/architecture.md, "Plain text"): a skill named in message metadata
(``skill``, crewAI's ``skill_id``) or request metadata (``params.metadata``), a JSON call written
as text, the card's ``default_skill``, the model-free router, and the answers when nothing fits.
The shapes a 0.3 client sends (text only, text + ``message.metadata.skill_id``, text +
``params.metadata.skill``) are sent here as they arrive after the SDK's 0.3 conversion.
"""

from __future__ import annotations

from typing import Any

import pytest
from a2a.types import Message, Part, Role, SendMessageRequest, Task, TaskState
from google.protobuf.json_format import MessageToDict, ParseDict
from google.protobuf.struct_pb2 import Struct

from node.client import artifacts_of, status_text, text_message
from tests.server.conftest import make_client

TEXT_TOOLS = ["text_stats", "keywords", "summarize", "json_query"]
ARTICLE = (
    "The city council met on Monday. The budget for parks was doubled. "
    "Two new libraries will open next year. Residents asked for more bike lanes."
)


def message(text: str, metadata: dict[str, Any] | None = None, task: Task | None = None) -> Message:
    msg = Message(role=Role.ROLE_USER, message_id=f"m-{abs(hash((text, str(metadata))))}")
    msg.parts.append(Part(text=text))
    if metadata:
        msg.metadata.CopyFrom(ParseDict(metadata, Struct()))
    if task is not None:
        msg.task_id, msg.context_id = task.id, task.context_id
    return msg


async def send(client: Any, msg: Message, request_metadata: dict[str, Any] | None = None) -> Task:
    request = SendMessageRequest(message=msg)
    if request_metadata:
        request.metadata.CopyFrom(ParseDict(request_metadata, Struct()))
    events = [event async for event in client.send_message(request)]
    assert len(events) == 1
    task: Task = events[0].task
    return task


def data_of(task: Task) -> dict[str, Any]:
    found = [p for p in task.status.message.parts if p.HasField("data")]
    assert found, "the status message carries no data part"
    data: dict[str, Any] = MessageToDict(found[0].data)
    return data


def last_agent_text(task: Task) -> str:
    """What a client takes as the answer: the status message's text, else the last agent
    message in history (crewAI's rule)."""
    texts = [p.text for p in task.status.message.parts if p.text]
    if texts:
        return " ".join(texts)
    agents = [m for m in task.history if m.role == Role.ROLE_AGENT]
    return " ".join(p.text for p in agents[-1].parts if p.text) if agents else ""


@pytest.fixture
async def client(start_node, http):
    url = await start_node(tools=TEXT_TOOLS)
    return await make_client(http, url)


@pytest.mark.parametrize(
    ("metadata", "request_metadata"),
    [
        ({"skill": "summarize"}, None),  # a2a-sdk 1.3 / a2a-node send
        ({"skill_id": "summarize"}, None),  # crewAI (0.3): its own message.metadata field
        (None, {"skill": "summarize"}),  # request-level params.metadata (ADK's hook, 0.3 too)
        (None, {"skill_id": "summarize"}),
    ],
)
async def test_text_with_a_named_skill_that_has_an_optional_integer_runs_it(
    client, metadata, request_metadata
):
    task = await send(client, message(ARTICLE, metadata), request_metadata)
    assert task.status.state == TaskState.TASK_STATE_COMPLETED, status_text(task)
    summary = artifacts_of(task)["summarize"][0]
    assert summary.startswith("The city council") and len(summary) < len(ARTICLE)
    assert last_agent_text(task) == summary


async def test_text_for_a_named_skill_that_needs_structured_arguments_asks_for_them(client):
    task = await send(client, message("people.name", {"skill": "json_query"}))
    assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert "takes expression, data, not one text" in status_text(task)
    assert data_of(task)["missing"] == ["expression", "data"]
    follow_up = message('{"expression": "a", "data": {"a": 5}}', task=task)
    done = await send(client, follow_up)
    assert done.status.state == TaskState.TASK_STATE_COMPLETED, status_text(done)
    assert artifacts_of(done) == {"json_query": [5]}


async def test_a_json_call_written_as_text_is_run(client):
    text = (
        '{"skill": "json_query", "arguments": {"expression": "length(xs)", "data": {"xs": [1, 2]}}}'
    )
    task = await send(client, message(text))
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert artifacts_of(task) == {"json_query": [2]}


async def test_a_malformed_json_call_in_text_is_rejected_with_where_it_broke(client):
    task = await send(client, message('{"skill": "summarize", "arguments": {"text": "x",}}'))
    assert task.status.state == TaskState.TASK_STATE_REJECTED
    reason = status_text(task)
    assert "not valid JSON" in reason and "line 1 column" in reason


async def test_clear_plain_text_is_routed_to_its_skill_and_answered_with_the_result(client):
    task = await send(client, message(f"Summarize this article: {ARTICLE}"))
    assert task.status.state == TaskState.TASK_STATE_COMPLETED, status_text(task)
    summary = artifacts_of(task)["summarize"][0]
    assert last_agent_text(task) == summary  # the result, not "calling summarize (1/1)"
    agent_history = [m for m in task.history if m.role == Role.ROLE_AGENT]
    assert not any("calling" in " ".join(p.text for p in m.parts) for m in agent_history)


async def test_ambiguous_text_asks_which_skill_with_candidates_then_runs_the_choice(client):
    task = await send(client, message(f"Analyse this text: {ARTICLE}"))
    assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    data = data_of(task)
    skills = [c["skill"] for c in data["candidates"]]
    assert "text_stats" in skills and len(skills) <= 3
    first = data["candidates"][0]
    assert first["takes_text"] is True and first["call"]["skill"] == first["skill"]
    assert "metadata.skill" in status_text(task)
    done = await send(client, message("keywords", task=task))
    assert done.id == task.id
    assert done.status.state == TaskState.TASK_STATE_COMPLETED, status_text(done)
    terms = [entry["term"] for entry in artifacts_of(done)["keywords"][0]]
    assert "analyse" in terms or "budget" in terms  # run on the first text


async def test_text_matching_nothing_offers_skills_without_running_any(client):
    task = await send(client, message("hello"))
    assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert "No skill matches" in status_text(task)
    assert not task.artifacts


async def test_a_card_default_skill_takes_plain_text(start_node, http):
    url = await start_node(tools=TEXT_TOOLS, routing={"default_skill": "text_stats"})
    task = await send(await make_client(http, url), message("hello there"))
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert artifacts_of(task)["text_stats"][0]["words"] == 2


async def test_a_default_skill_that_is_not_a_skill_fails_with_a_reason(start_node, http):
    url = await start_node(tools=TEXT_TOOLS, routing={"default_skill": "nope"})
    task = await send(await make_client(http, url), message("hello there"))
    assert task.status.state == TaskState.TASK_STATE_FAILED
    assert "default_skill 'nope'" in status_text(task)


async def test_the_router_can_be_turned_off(start_node, http):
    url = await start_node(tools=TEXT_TOOLS, routing={"router": False})
    task = await send(await make_client(http, url), message(f"Summarize: {ARTICLE}"))
    assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert "needs a named skill" in status_text(task)


async def test_the_router_never_runs_a_skill_that_writes(start_node, http, tmp_path):
    url = await start_node(tools=["write_file", "read_file"])
    task = await send(await make_client(http, url), message("write the text hello to notes.txt"))
    assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert "write_file" in [c["skill"] for c in data_of(task)["candidates"]]
    assert not list(tmp_path.rglob("notes.txt"))


async def test_the_card_publishes_examples_for_the_router_and_clients(start_node, http):
    from a2a.client import A2ACardResolver

    url = await start_node(tools=[{"name": "summarize", "examples": ["Summarize this memo"]}])
    card = await A2ACardResolver(http, url).get_agent_card()
    skill = next(s for s in card.skills if s.id == "summarize")
    assert list(skill.examples) == ["Summarize this memo"]


async def test_text_message_helper_still_names_the_skill(client):
    task = await send(client, text_message("one two three", skill="text_stats"))
    assert artifacts_of(task)["text_stats"][0]["words"] == 3


# -- the 0.3 wire, as a2a-sdk 0.3 clients (strands, beeai, crewAI) send it: no A2A-Version header


def legacy_send(text: str, message_metadata: Any = None, metadata: Any = None) -> dict[str, Any]:
    msg: dict[str, Any] = {
        "kind": "message",
        "role": "user",
        "messageId": f"legacy-{abs(hash((text, str(message_metadata), str(metadata))))}",
        "parts": [{"kind": "text", "text": text}],
    }
    if message_metadata:
        msg["metadata"] = message_metadata
    params: dict[str, Any] = {"message": msg}
    if metadata:
        params["metadata"] = metadata
    return {"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": params}


def legacy_answer(task: dict[str, Any]) -> str:
    """crewAI's reading of a 0.3 task: the status message's text parts, else the last agent
    message in history."""
    parts = (task["status"].get("message") or {}).get("parts", [])
    texts = [p["text"] for p in parts if p.get("kind") == "text"]
    if not texts:
        agents = [m for m in task.get("history", []) if m["role"] == "agent"]
        texts = (
            [p["text"] for p in agents[-1]["parts"] if p.get("kind") == "text"] if agents else []
        )
    return " ".join(texts)


@pytest.mark.parametrize(
    ("text", "message_metadata", "metadata"),
    [
        (f"Summarize this article: {ARTICLE}", None, None),  # text only (strands, beeai)
        (ARTICLE, {"skill_id": "summarize"}, None),  # crewAI
        (ARTICLE, None, {"skill": "summarize"}),  # request-level metadata
    ],
)
async def test_0_3_text_requests_complete_with_the_result_as_the_answer(
    start_node, http, text, message_metadata, metadata
):
    url = await start_node(tools=TEXT_TOOLS)
    response = await http.post(url + "/", json=legacy_send(text, message_metadata, metadata))
    assert response.status_code == 200
    task = response.json()["result"]
    assert task["kind"] == "task" and task["status"]["state"] == "completed", task["status"]
    summary = task["artifacts"][0]["parts"][0]["text"]
    assert "The city council met on Monday." in summary and len(summary) < len(text)
    assert legacy_answer(task) == summary


async def test_0_3_ambiguous_text_gets_input_required_with_candidates(start_node, http):
    url = await start_node(tools=TEXT_TOOLS)
    response = await http.post(url + "/", json=legacy_send(f"Analyse this text: {ARTICLE}"))
    task = response.json()["result"]
    assert task["status"]["state"] == "input-required"
    parts = task["status"]["message"]["parts"]
    assert any(p["kind"] == "text" and "Candidates" in p["text"] for p in parts)
    data = next(p["data"] for p in parts if p["kind"] == "data")
    assert [c["skill"] for c in data["candidates"]][:1] == ["text_stats"]
