"""Listings render entries through :class:`EntryRenderer`: the same bytes as ``render_entry``,
whatever changed since the fixed part was kept, and bounded."""

from __future__ import annotations

from dataclasses import replace

import pytest

from node.registry.records import RENDER_ERRORS, AgentRecord, EntryRenderer, Skill, render_entry

BASE = AgentRecord(
    id="a-1",
    card_url="http://127.0.0.1:9/a.json",
    name='Ångström "quoted" \\ agent',
    description="日本語 </script> \u2028",
    skills=(Skill("s", "S", "does s", ("t", "ü")), Skill("x", "X", "", ())),
    card={"name": "A", "n": 1.5, "nested": {"ok": [True, None]}},
    registered_at=1_700_000_000.25,
    last_seen=1_700_000_100.5,
)
CHANGES = [
    {},
    {"last_seen": 1_700_000_200.0},
    {"name": "Renamed"},
    {"description": "other"},
    {"card_url": "http://127.0.0.1:9/b.json"},
    {"skills": (Skill("s", "S", "does s", ("t",)),)},
    {"registered_at": 1_600_000_000.0},
    {"card": {"name": "B"}},
]


@pytest.mark.parametrize("with_card", [False, True])
@pytest.mark.parametrize("healthy", [False, True])
def test_the_renderer_writes_what_render_entry_writes(with_card: bool, healthy: bool) -> None:
    renderer = EntryRenderer()
    for _ in range(2):  # first rendered, then from the kept part
        for change in CHANGES:
            record = replace(BASE, **change)  # type: ignore[arg-type]
            args = {"healthy": healthy, "expires_at": record.last_seen + 30, "with_card": with_card}
            assert renderer.render(record, **args) == render_entry(record, **args), change
    assert len(renderer) == len(CHANGES) - 2  # heartbeat and card changes keep the fixed part


def test_the_renderer_is_bounded_and_raises_what_render_entry_raises() -> None:
    renderer = EntryRenderer(max_entries=3)
    for i in range(10):
        renderer.render(
            replace(BASE, id=f"a-{i}"), healthy=True, expires_at=BASE.last_seen, with_card=False
        )
    assert len(renderer) == 3
    with pytest.raises(RENDER_ERRORS):
        renderer.render(
            replace(BASE, id="bad", last_seen=1e300), healthy=True, expires_at=0, with_card=False
        )
    with pytest.raises(RENDER_ERRORS):
        renderer.render(
            replace(BASE, id="lone", name="\ud800"), healthy=True, expires_at=0, with_card=False
        )
