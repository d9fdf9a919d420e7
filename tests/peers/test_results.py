from __future__ import annotations

from a2a.helpers import new_data_part, new_text_part
from a2a.types import Artifact, Message, Part

from node.peers.results import parts_result, task_result


def artifact(name: str, *parts: Part) -> Artifact:
    return Artifact(artifact_id=name, name=name, parts=list(parts))


def test_one_data_part_is_the_data_with_integers_restored() -> None:
    result = task_result([artifact("a", new_data_part({"n": 3, "x": 1.5, "l": [2]}))], None)
    assert result == {"n": 3, "x": 1.5, "l": [2]}
    assert isinstance(result["n"], int)


def test_text_parts_are_joined() -> None:
    arts = [
        artifact("a", new_text_part("one"), new_text_part("two")),
        artifact("b", new_text_part("3")),
    ]
    assert task_result(arts, None) == "one\ntwo\n3"


def test_anything_else_is_a_list_of_named_parts() -> None:
    arts = [artifact("a", new_text_part("t")), artifact("b", new_data_part([1]))]
    assert task_result(arts, None) == [
        {"name": "a", "parts": [{"text": "t"}]},
        {"name": "b", "parts": [{"data": [1]}]},
    ]


def test_no_artifacts_falls_back_to_the_status_message() -> None:
    status = Message(parts=[new_text_part("done, nothing to show")])
    assert task_result([], status) == "done, nothing to show"
    assert task_result([], None) == ""


def test_direct_message_parts() -> None:
    assert parts_result([new_data_part({"ok": True})]) == {"ok": True}
    assert parts_result([new_text_part("hi")]) == "hi"


def test_one_data_part_described_by_text_is_the_data() -> None:
    parts = [new_data_part({"agents": []}), new_text_part("found 0 agents")]
    assert parts_result(parts) == {"agents": []}
    two = [new_data_part({"a": 1}), new_data_part({"b": 2})]
    assert parts_result(two) == [{"data": {"a": 1}}, {"data": {"b": 2}}]


def test_one_artifact_reads_like_a_message() -> None:
    described = artifact("a", new_text_part("echo: hi"), new_data_part({"received": [1]}))
    assert task_result([described], None) == {"received": [1]}
    assert task_result([artifact("a", new_text_part("one"))], None) == "one"
