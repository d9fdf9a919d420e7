"""The card cache stays within its byte budget and drops the least recently used first."""

from __future__ import annotations

from node.registry.card_cache import CardCache
from node.registry.store import Card


def card(size: int) -> Card:
    return Card({"size": size}, size)


def test_the_cache_stays_within_its_bytes_dropping_the_least_recently_used() -> None:
    cache = CardCache(max_bytes=1000)
    for i in range(5):
        cache.put(f"a{i}", "r1", card(100))
    assert cache.get("a0", "r1") is not None  # a0 is now the most recently used
    for i in range(5, 11):
        cache.put(f"a{i}", "r1", card(100))
    assert cache.bytes <= 1000
    assert cache.get("a0", "r1") is not None
    assert cache.get("a1", "r1") is None  # the least recently used went first
    assert len(cache) == 10


def test_a_new_revision_is_a_new_key_and_a_huge_card_is_not_kept() -> None:
    cache = CardCache(max_bytes=1000)
    cache.put("a", "r1", card(50))
    assert cache.get("a", "r2") is None  # re-registered: the old card is never served
    cache.put("a", "r2", card(60))
    assert cache.get("a", "r2") == card(60)
    cache.put("b", "r1", card(900))  # over an eighth of the budget: would flush the rest
    assert cache.get("b", "r1") is None
    assert cache.get("a", "r2") is not None
