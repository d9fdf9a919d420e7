"""The in-memory index on its own: order, filters, text matching and cursors."""

from __future__ import annotations

from dataclasses import replace

import pytest

from node.registry.index import AgentIndex
from node.registry.records import AgentRecord, Skill


def record(agent_id: str, name: str, *skills: Skill, description: str = "") -> AgentRecord:
    return AgentRecord(agent_id, f"http://h/{agent_id}", name, description, skills, {}, 0.0, 0.0)


def names(found: tuple[list[AgentRecord], object]) -> list[str]:
    return [r.name for r in found[0]]


@pytest.fixture
def index() -> AgentIndex:
    idx = AgentIndex()
    for i, name in enumerate(["delta", "Alpha", "charlie", "Bravo", "echo"]):
        idx.put(record(f"id{i}", name, Skill(f"s{i % 2}", "Skill", f"does {name} things", ("t",))))
    return idx


def test_order_is_by_casefolded_name(index: AgentIndex) -> None:
    assert names(index.search()) == ["Alpha", "Bravo", "charlie", "delta", "echo"]


def test_text_matches_first_and_last_entries_and_not_across_them(index: AgentIndex) -> None:
    assert names(index.search(q="ALPHA")) == ["Alpha"]
    assert names(index.search(q="echo")) == ["echo"]
    assert names(index.search(q="things")) == ["Alpha", "Bravo", "charlie", "delta", "echo"]
    assert names(index.search(q="echo\x01")) == []
    assert names(index.search(q="sdelta")) == []


def test_text_search_pages_with_the_cursor(index: AgentIndex) -> None:
    first, cursor = index.search(q="things", limit=2)
    assert [r.name for r in first] == ["Alpha", "Bravo"]
    second, cursor = index.search(q="things", limit=2, after=cursor)
    assert [r.name for r in second] == ["charlie", "delta"]
    third, cursor = index.search(q="things", limit=2, after=cursor)
    assert ([r.name for r in third], cursor) == (["echo"], None)


def test_filters_and_predicate_combine(index: AgentIndex) -> None:
    assert names(index.search(skill="s0")) == ["charlie", "delta", "echo"]
    assert names(index.search(skill="s0", q="ch")) == ["charlie", "echo"]
    assert names(index.search(tag="t", accept=lambda r: r.name != "echo", q="ch")) == ["charlie"]


def test_changes_are_seen_by_the_next_search(index: AgentIndex) -> None:
    index.put(record("id0", "zulu"))  # renamed: moves to the end, loses its skill
    index.remove("id4")
    assert names(index.search()) == ["Alpha", "Bravo", "charlie", "zulu"]
    assert names(index.search(q="delta")) == []
    assert names(index.search(skill="s0")) == ["charlie"]


def test_a_heartbeat_keeps_the_entry_in_place(index: AgentIndex) -> None:
    before = index.get("id1")
    assert before is not None
    index.put(replace(before, last_seen=99.0))
    assert index.get("id1") == replace(before, last_seen=99.0)
    assert names(index.search(q="alpha")) == ["Alpha"]


def test_a_new_record_for_a_known_url_replaces_the_old_one(index: AgentIndex) -> None:
    old = index.get("id1")
    assert old is not None
    index.put(replace(old, id="other"))
    assert index.get("id1") is None
    assert index.id_for_url(old.card_url) == "other"
    assert len(index) == 5
