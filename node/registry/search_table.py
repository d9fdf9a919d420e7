"""PostgreSQL: ``registry_search``, the narrow table a text search reads instead of the rows.

One row (``agent_id``, ``name_key``, ``words``: ~400 bytes) per served agent row, with the word
and name indexes (GIN over the words' ``tsvector``, ``pg_trgm`` over ``name_key``) and a B-tree
in page order. A text search finds and sorts its matches here and reads ``registry_agents``
(rows of ~2 kB holding the cards) only for the page's candidates: with the indexes on the wide
rows, every match was a random read of a wide heap tuple, and the window walked wide rows too.
Only registrations write this table (never a heartbeat), so its pages stay all-visible and its
heap stays in the order it was filled (page order, after a migration or a bulk load).

The store keeps it in the same statements as the rows: inserted after them (:func:`add`), taken
out when a row is set aside or re-indexed (:func:`remove`), deleted with the row by cascade (the
sweep stays one statement). :func:`build` creates it at start, filling it from the rows when it
is new (a store of an older version: ~1.5 min at 1M rows, once) or after a bulk load.
"""

from __future__ import annotations

import logging
import time

from sqlalchemy import Text, column, delete, select, table, text
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql.elements import ColumnElement

from node.registry.schema import PG_GIN_PENDING, PG_WORDS, agents

log = logging.getLogger(__name__)

SEARCH = table(
    "registry_search", column("agent_id", Text), column("name_key", Text), column("words", Text)
)
WORDS = PG_WORDS.replace("words", "registry_search.words")
"""The words as a ``tsvector`` (see :data:`node.registry.schema.PG_WORDS`), over this table."""
_TABLE = (
    'CREATE TABLE registry_search (agent_id VARCHAR(128) COLLATE "C" PRIMARY KEY '
    "REFERENCES registry_agents (id) ON DELETE CASCADE, "
    'name_key TEXT COLLATE "C" NOT NULL, words TEXT NOT NULL)'
)
_INDEXES = {
    "registry_search_order": "(name_key, agent_id)",
    "registry_search_words": f"USING gin ({PG_WORDS}) WITH ({PG_GIN_PENDING})",
}
_TRIGRAMS = {"registry_search_names": f"USING gin (name_key gin_trgm_ops) WITH ({PG_GIN_PENDING})"}
OLD_INDEXES = ("registry_agents_words", "registry_agents_names")
"""Where earlier versions kept the word and name indexes: on the wide rows (dropped at start)."""
_FILL = (
    "INSERT INTO registry_search (agent_id, name_key, words) "
    "SELECT id, name_key, coalesce(words, '') FROM registry_agents WHERE name_key IS NOT NULL"
)


async def build(conn: AsyncConnection, *, refill: bool, trigram: bool) -> None:
    """Create the table and its indexes where missing; fill it from the served rows when it is
    new or ``refill`` (after a bulk load), building the indexes after the rows, in page order."""
    new = not await conn.scalar(text("SELECT to_regclass('registry_search') IS NOT NULL"))
    if new:
        await conn.execute(text(_TABLE))
    indexes = {**_INDEXES, **(_TRIGRAMS if trigram else {})}
    if new or refill:
        started = time.monotonic()
        for name in indexes:
            await conn.execute(text(f"DROP INDEX IF EXISTS {name}"))
        await conn.execute(text("TRUNCATE registry_search"))
        filled = (await conn.execute(text(_FILL + " ORDER BY name_key, id"))).rowcount
    for name, how in indexes.items():
        await conn.execute(text(f"CREATE INDEX IF NOT EXISTS {name} ON registry_search {how}"))
    for name in OLD_INDEXES:
        await conn.execute(text(f"DROP INDEX IF EXISTS {name}"))
    if new or refill:
        await conn.execute(text("ANALYZE registry_search"))
        log.info(
            "registry: registry_search filled with %d rows in %.1f s",
            filled,
            time.monotonic() - started,
        )


async def add(conn: AsyncConnection, ids: list[str]) -> None:
    """Add the served rows among ``ids`` (just written, in this transaction)."""
    await conn.execute(text(_FILL + " AND id = ANY(CAST(:ids AS TEXT[]))").bindparams(ids=ids))


async def remove(conn: AsyncConnection, where: ColumnElement[bool]) -> None:
    """Take out the rows of the agent rows ``where`` says (before they are set aside or
    re-indexed; a deleted row's goes by cascade)."""
    await conn.execute(
        delete(SEARCH).where(SEARCH.c.agent_id.in_(select(agents.c.id).where(where)))
    )
