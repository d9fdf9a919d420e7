"""The direct planner: structured requests name their skill or calls; no model involved."""

from __future__ import annotations

from typing import Any

import pytest

from node.planning.direct import (
    InvalidRequest,
    NeedsInput,
    NoSkillNamed,
    UnknownSkill,
    is_free_text,
    plan_request,
)
from node.planning.request import Request, parse_request
from node.tooling import Tool, tool


@tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
async def echo(text: str) -> str:
    """Echo a text."""
    return text


@tool
async def note(title: str, body: str) -> str:
    """Write a note."""
    return f"{title}: {body}"


SKILLS: dict[str, Tool] = {t.name: t for t in (add, echo, note)}


def plan(*data: Any, text: str = "", **kw: Any) -> list[tuple[str, Any]]:
    metadata = kw.pop("metadata", {})
    calls = plan_request(Request(text, data, metadata), SKILLS, **kw)
    return [(c.name, c.arguments) for c in calls]


@pytest.mark.parametrize("key", ["skill", "tool"])
def test_a_data_part_names_the_skill_and_its_arguments(key: str) -> None:
    assert plan({key: "add", "arguments": {"a": 1, "b": 2}}) == [("add", {"a": 1, "b": 2})]


def test_arguments_may_be_a_json_string() -> None:
    assert plan({"skill": "add", "arguments": '{"a": 1, "b": 2}'}) == [("add", {"a": 1, "b": 2})]


def test_arguments_that_are_not_json_are_a_bad_request() -> None:
    with pytest.raises(InvalidRequest, match="not valid JSON"):
        plan({"skill": "add", "arguments": "{a: 1"})


def test_missing_required_arguments_ask_for_input() -> None:
    with pytest.raises(NeedsInput) as caught:
        plan({"skill": "add", "arguments": {"a": 1}})
    need = caught.value
    assert (need.skill, need.arguments, need.missing) == ("add", {"a": 1}, ["b"])
    assert need.schema == {
        "type": "object",
        "properties": {"b": add.parameters["properties"]["b"]},
        "required": ["b"],
    }
    assert need.to_data()["pending"] == {"skill": "add", "arguments": {"a": 1}}
    assert str(need) == "skill 'add' needs: b"


def test_a_list_of_calls_is_planned_in_order_without_asking_for_input() -> None:
    calls = [{"tool": "echo", "arguments": {"text": "x"}}, {"skill": "add", "arguments": {}}]
    assert plan({"calls": calls}) == [("echo", {"text": "x"}), ("add", {})]


@pytest.mark.parametrize(
    ("calls", "message"),
    [
        ([], "non-empty list"),
        ({"tool": "echo"}, "non-empty list"),
        (["echo"], "each call must be an object"),
        ([{"tool": "echo", "arguments": {"text": "x"}}] * 3, r"too many calls: 3 > 2"),
    ],
)
def test_bad_call_lists_are_refused(calls: Any, message: str) -> None:
    with pytest.raises(InvalidRequest, match=message):
        plan({"calls": calls}, max_calls=2)


def test_an_unknown_skill_gets_one_hint() -> None:
    with pytest.raises(UnknownSkill, match=r"unknown skill 'ad'; did you mean 'add'\?"):
        plan({"skill": "ad", "arguments": {}})


def test_only_the_given_skills_can_be_named() -> None:
    with pytest.raises(UnknownSkill):
        plan_request(Request(data=({"skill": "note", "arguments": {}},)), {"add": add})


def test_text_fills_the_single_string_parameter_of_the_named_skill() -> None:
    assert plan(text="hello", metadata={"skill": "echo"}) == [("echo", {"text": "hello"})]


def test_a_data_part_fills_the_arguments_of_the_named_skill() -> None:
    assert plan({"a": 1, "b": 2}, metadata={"skill": "add"}) == [("add", {"a": 1, "b": 2})]


def test_text_for_a_skill_without_one_required_string_asks_for_its_arguments() -> None:
    with pytest.raises(NeedsInput, match=r"skill 'add' takes a, b, not one text") as caught:
        plan(text="1 + 2", metadata={"skill": "add"})
    assert caught.value.missing == ["a", "b"]
    assert caught.value.schema["required"] == ["a", "b"]


@tool
async def digest(text: str, sentences: int = 3, style: str = "plain") -> str:
    """Summarize a text (optional parameters keep their defaults)."""
    return text


@tool
async def listing(path: str = ".") -> str:
    """List a folder (nothing required)."""
    return path


def test_optional_parameters_do_not_stop_text_filling_the_required_string() -> None:
    calls = plan_request(Request("some text", metadata={"skill": "digest"}), {"digest": digest})
    assert [(c.name, c.arguments) for c in calls] == [("digest", {"text": "some text"})]


def test_a_data_part_beside_the_text_adds_optional_arguments() -> None:
    request = Request("some text", ({"sentences": 2},), {"skill": "digest"})
    calls = plan_request(request, {"digest": digest})
    assert calls[0].arguments == {"sentences": 2, "text": "some text"}


def test_text_for_a_skill_requiring_nothing_is_refused_clearly() -> None:
    with pytest.raises(InvalidRequest, match="takes no required text"):
        plan_request(Request("src", metadata={"skill": "listing"}), {"listing": listing})


@pytest.mark.parametrize(
    ("metadata", "request_metadata"),
    [
        ({"skill_id": "echo"}, {}),  # crewAI
        ({}, {"skill": "echo"}),  # request-level params.metadata (ADK's hook)
        ({}, {"skill_id": "echo"}),
        ({"skill": "echo"}, {"skill": "add"}),  # the message's wins
    ],
)
def test_the_skill_may_be_named_in_message_or_request_metadata(
    metadata: dict[str, Any], request_metadata: dict[str, Any]
) -> None:
    request = Request("hi", (), metadata, request_metadata)
    assert [(c.name, c.arguments) for c in plan_request(request, SKILLS)] == [
        ("echo", {"text": "hi"})
    ]


def test_a_json_object_in_text_holds_the_named_skills_arguments() -> None:
    assert plan(text='{"a": 1, "b": 2}', metadata={"skill": "add"}) == [("add", {"a": 1, "b": 2})]


@pytest.mark.parametrize("key", ["skill", "tool"])
def test_a_json_call_written_as_text_is_a_structured_call(key: str) -> None:
    text = f'  {{"{key}": "add", "arguments": {{"a": 1, "b": 2}}}}\n'
    assert plan(text=text) == [("add", {"a": 1, "b": 2})]
    assert not is_free_text(Request(text))


def test_a_json_list_of_calls_written_as_text_is_planned() -> None:
    text = '{"calls": [{"skill": "echo", "arguments": {"text": "x"}}]}'
    assert plan(text=text) == [("echo", {"text": "x"})]


def test_a_malformed_json_call_in_text_gets_a_clear_answer() -> None:
    with pytest.raises(
        InvalidRequest, match=r"looks like a JSON call but is not valid JSON.*line 1"
    ):
        plan(text='{"skill": "add", "arguments": {"a": 1,}}')


def test_text_that_only_looks_like_braces_is_plain_text() -> None:
    assert is_free_text(Request("{not json at all}"))
    assert is_free_text(Request('{"a": 1}'))  # an object that names no skill


def test_named_or_structured_text_is_not_free_text() -> None:
    assert not is_free_text(Request("hi", metadata={"skill_id": "echo"}))
    assert not is_free_text(Request("hi", ({"skill": "echo"},)))
    assert not is_free_text(Request(""))


def test_a_named_skill_without_input_asks_for_it() -> None:
    with pytest.raises(NeedsInput) as caught:
        plan(metadata={"skill": "note"})
    assert caught.value.missing == ["title", "body"]


def test_a_request_naming_nothing_lists_the_skills() -> None:
    with pytest.raises(NoSkillNamed, match=r"Skills: add, echo, note\."):
        plan(text="what can you do?")


def test_the_skill_list_is_bounded() -> None:
    many = {f"t{i:02}": add for i in range(25)}
    with pytest.raises(NoSkillNamed, match=r"t19 \(and 5 more\)") as caught:
        plan_request(Request(text="hi"), many)
    assert "t20" not in str(caught.value)


def test_data_parts_that_are_not_objects_are_skipped() -> None:
    assert plan([1, 2], {"skill": "echo", "arguments": {"text": "x"}}) == [("echo", {"text": "x"})]


PENDING = {"skill": "note", "arguments": {"title": "t"}}


@pytest.mark.parametrize("data", [{"arguments": {"body": "b"}}, {"body": "b"}])
def test_a_follow_up_supplies_the_missing_arguments(data: dict[str, Any]) -> None:
    assert plan(data, pending=PENDING) == [("note", {"title": "t", "body": "b"})]


def test_a_follow_up_text_fills_the_single_missing_string() -> None:
    assert plan(text="b", pending=PENDING) == [("note", {"title": "t", "body": "b"})]


def test_a_follow_up_text_cannot_fill_several_missing_arguments() -> None:
    with pytest.raises(InvalidRequest, match="as data or a JSON object: title, body"):
        plan(text="b", pending={"skill": "note", "arguments": {}})


def test_a_follow_up_may_be_a_json_object_in_text() -> None:
    pending = {"skill": "note", "arguments": {}}
    assert plan(text='{"title": "t", "body": "b"}', pending=pending) == [
        ("note", {"title": "t", "body": "b"})
    ]


CHOICE = {"choose": ["echo", "note"], "text": "the first text"}


@pytest.mark.parametrize("reply", ["echo", " Echo. ", "'echo'"])
def test_a_reply_naming_a_candidate_runs_it_on_the_first_text(reply: str) -> None:
    assert plan(text=reply, pending=CHOICE) == [("echo", {"text": "the first text"})]


def test_any_other_reply_to_a_choice_is_a_new_request() -> None:
    assert plan(text="new", metadata={"skill": "echo"}, pending=CHOICE) == [
        ("echo", {"text": "new"})
    ]
    with pytest.raises(NoSkillNamed):
        plan(text="something else", pending=CHOICE)


def test_a_follow_up_that_still_misses_something_asks_again() -> None:
    with pytest.raises(NeedsInput) as caught:
        plan({"title": "t"}, pending={"skill": "note", "arguments": {}})
    assert (caught.value.arguments, caught.value.missing) == ({"title": "t"}, ["body"])


def test_a_follow_up_that_is_not_an_object_is_refused() -> None:
    with pytest.raises(InvalidRequest, match="must be a JSON object"):
        plan({"arguments": "[1, 2]"}, pending=PENDING)


def test_parse_request_joins_texts_and_turns_whole_floats_into_ints() -> None:
    request = parse_request(["a", "", "b"], [{"limit": 5.0, "x": [1.5, 2.0]}], {"n": 3.0})
    assert request == Request("a\nb", ({"limit": 5, "x": [1.5, 2]},), {"n": 3})


def test_parse_request_keeps_the_request_metadata_apart() -> None:
    request = parse_request(["a"], [], {"skill": "x"}, {"skill_id": "y", "n": 2.0})
    assert request.request_metadata == {"skill_id": "y", "n": 2}
    assert request.named_skill == "x"
