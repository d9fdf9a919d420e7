"""The card settings around restart recovery and idempotent sends."""

from __future__ import annotations

from typing import Any

import pytest

from node.card import parse_card
from node.errors import ConfigError

BASE: dict[str, Any] = {"id": "n", "name": "N", "description": "d"}


def test_recover_orphaned_is_on_by_default() -> None:
    assert parse_card(BASE, env={}).server.recover_orphaned


@pytest.mark.parametrize("key", ["recover_orphaned", "recover_interrupted"])
def test_recover_orphaned_reads_its_deprecated_name_too(key: str) -> None:
    card = parse_card({**BASE, "server": {key: False}}, env={})
    assert card.server.recover_orphaned is False


def test_send_window_defaults_to_a_day_and_must_be_positive() -> None:
    assert parse_card(BASE, env={}).limits.send_window_s == 24 * 3600
    assert parse_card({**BASE, "limits": {"send_window_s": 60}}, env={}).limits.send_window_s == 60
    with pytest.raises(ConfigError):
        parse_card({**BASE, "limits": {"send_window_s": 0}}, env={})
