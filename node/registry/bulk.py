"""From card URLs to validated cards ready to store: one at a time or a batch at once.

    got = await prepare(fetcher, url, stored='"v1"', wait_s=2.0)   # Prepared or Unchanged
    got = await prepare_all(fetcher, urls, stored, wait_s=5.0)      # one per URL, in order

A card whose stored validator still matches (a 304 to ``If-None-Match``, or the same
``sha256:`` of the body) is :class:`Unchanged` and is not parsed. :func:`prepare_all` fetches
within the fetcher's slots (bounded concurrency, per host) and turns each URL's error into its
result, so one bad URL costs only its own entry. :class:`Outcome` is one URL's result in
``POST /v1/agents:import`` (:func:`import_body`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from node.errors import RegistryError
from node.registry.cards import CardInfo, card_from_body
from node.registry.errors import status_and_code
from node.registry.fetcher import CardFetcher, Fetched
from node.registry.pipelined import fetch_pipelined


@dataclass(frozen=True, slots=True)
class Prepared:
    """A fetched and validated card, with the validator to store beside it."""

    url: str
    info: CardInfo
    validator: str | None


@dataclass(frozen=True, slots=True)
class Unchanged:
    """The card at ``url`` is the one stored (not parsed)."""

    url: str


@dataclass(frozen=True, slots=True)
class Outcome:
    """One URL's result in an import (``card_url`` as sent, even when it is not a string)."""

    card_url: object
    status: Literal["registered", "unchanged", "error"]
    agent_id: str | None = None
    error: RegistryError | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"card_url": self.card_url, "status": self.status}
        if self.agent_id is not None:
            out["id"] = self.agent_id
        if self.error is not None:
            status, code = status_and_code(self.error)
            out["error"] = {"code": code, "status": status, "message": str(self.error)}
        return out


async def prepare(
    fetcher: CardFetcher, url: str, *, stored: str | None, wait_s: float | None
) -> Prepared | Unchanged:
    """Fetch ``url`` (conditionally, when ``stored`` is its stored validator) and validate it."""
    fetched = await fetcher.fetch(url, stored=stored, wait_s=wait_s)
    if fetched.unchanged(stored):
        return Unchanged(url)
    if fetched.body is None:  # a 304 to a validator that is not ours: fetch it whole
        fetched = await fetcher.fetch(url, wait_s=wait_s)
    assert fetched.body is not None
    return Prepared(url, card_from_body(fetched.body), fetched.validator)


async def prepare_all(
    fetcher: CardFetcher,
    urls: Sequence[str],
    stored: Mapping[str, str | None],
    *,
    wait_s: float | None,
) -> list[Prepared | Unchanged | RegistryError]:
    """:func:`prepare` for every URL, one per URL in order. The cards are first fetched over
    pipelined keep-alive connections (:mod:`node.registry.pipelined`) and validated as each
    answer is parsed; what that path leaves (https, redirects, hosts that do not pipeline,
    every error it does not decide) goes through :func:`prepare`, taken in turn by as many
    workers as the fetcher has slots. Either way each fetch holds a slot (per host too)."""
    out: list[Prepared | Unchanged | RegistryError | None] = [None] * len(urls)

    def deliver(i: int, fetched: Fetched | RegistryError) -> None:
        url = urls[i]
        if isinstance(fetched, RegistryError):
            out[i] = fetched
        elif fetched.unchanged(stored.get(url)):
            out[i] = Unchanged(url)
        elif fetched.body is None:  # a 304 to a validator that is not ours
            left.append(i)
        else:
            try:
                out[i] = Prepared(url, card_from_body(fetched.body), fetched.validator)
            except RegistryError as exc:
                out[i] = exc

    left: list[int] = []
    left.extend(await fetch_pipelined(fetcher, urls, stored, deliver))
    todo = iter(left)

    async def work() -> None:
        for i in todo:
            url = urls[i]
            try:
                out[i] = await prepare(fetcher, url, stored=stored.get(url), wait_s=wait_s)
            except RegistryError as exc:
                out[i] = exc

    await asyncio.gather(*(work() for _ in range(min(len(left), fetcher.concurrency))))
    done = [o for o in out if o is not None]
    assert len(done) == len(urls)
    return done


def import_body(outcomes: Sequence[Outcome]) -> dict[str, Any]:
    """The answer to ``POST /v1/agents:import``: every URL's outcome, in order, and counts."""
    counts = {"registered": 0, "unchanged": 0, "error": 0}
    for outcome in outcomes:
        counts[outcome.status] += 1
    return {
        "results": [o.to_json() for o in outcomes],
        "registered": counts["registered"],
        "unchanged": counts["unchanged"],
        "errors": counts["error"],
    }
