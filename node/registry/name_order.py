"""SQLite: the text indexes' rowids in page order, so a page of their matches stops early.

Each served row has an ``ord``: a 63-bit integer whose high :data:`PREFIX_BITS` encode the
first :data:`PREFIX_BYTES` bytes of its ``name_key`` (each byte to a 6-bit code that never
decreases with the byte, :data:`CODES`), and whose low :data:`SLOT_BITS` tell apart rows whose
keys begin alike (a "group"). So ``a < b`` (byte-wise) gives ``ord(a) <= ord(b)`` up to the
slot, and a group holds the rows whose keys share those bytes. ``registry_order`` (ord, agent
rowid, name_key, id) holds one row per served row, and the FTS5 word and name tables
(contentless) hold each row at its ``ord``: their matches come in (near) page order, lazily,
and :mod:`node.registry.search_sql` reads them until a page is full, then only the rest of the
last group, sorting exactly by ``(name_key, id)`` (the first page of a part of a common name
reads one page of matches instead of every match).

The slot is the agent row's rowid (its low bits); when another row of the group holds it, an
insert tries other slots (:func:`add`). Writes stay set-based: one ``INSERT ... SELECT`` per
table, the ``ord`` computed by the SQL function :func:`ord_of` (registered on every connection).
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import (
    Integer,
    column,
    exists,
    func,
    insert,
    literal,
    literal_column,
    select,
    table,
    text,
)
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql.elements import ColumnElement

from node.errors import RegistryError
from node.registry.schema import agents

PREFIX_BYTES = 7
PREFIX_BITS = 6 * PREFIX_BYTES
SLOT_BITS = 63 - PREFIX_BITS
GROUP = (1 << SLOT_BITS) - 1
"""``ord | GROUP`` is the last ``ord`` of its group."""
ATTEMPTS = 64
"""Slots tried for a row before its group counts as full (2M rows beginning with 7 same bytes)."""
_OWN_CODES = b" -.0123456789_abcdefghijklmnopqrstuvwxyz"


def _codes() -> tuple[int, ...]:
    """A 6-bit code per byte that never decreases with the byte: 0 ends the key (and NUL),
    common bytes of casefolded names get a code each, the runs between them one code per run,
    and bytes from 0x80 (UTF-8 beyond ASCII) share the codes left, in order."""
    codes = [0] * 256
    code, in_run = 0, False
    for byte in range(1, 0x80):
        if byte in _OWN_CODES or not in_run:
            code += 1
        in_run = byte not in _OWN_CODES
        codes[byte] = code
    left = 63 - code
    for i in range(0x80):
        codes[0x80 + i] = code + 1 + i * left // 0x80
    return tuple(codes)


CODES = _codes()


def prefix(name_key: str) -> int:
    """The group of ``name_key`` (:data:`PREFIX_BITS` bits), in page order."""
    out = 0
    raw = name_key.encode("utf-8", "surrogatepass")[:PREFIX_BYTES]
    for byte in raw:
        out = (out << 6) | CODES[byte]
    return out << (6 * (PREFIX_BYTES - len(raw)))


def lowest(name_key: str) -> int:
    """The lowest ``ord`` a row whose key is ``name_key`` can have (a cursor's lower bound)."""
    return prefix(name_key) << SLOT_BITS


def ord_of(name_key: Any, rowid: Any, attempt: Any) -> int | None:
    """SQL ``registry_ord(name_key, rowid, attempt)``: the row's ``ord`` at try ``attempt``."""
    if not isinstance(name_key, str) or not isinstance(rowid, int):
        return None
    slot = rowid if attempt == 0 else hash((rowid, attempt))
    return lowest(name_key) | (slot & GROUP)


SQL_FUNCTION = ("registry_ord", 3, ord_of)
ORDER = table(
    "registry_order",
    column("ord", Integer()),
    column("agent_rowid", Integer()),
    column("name_key"),
    column("id"),
)
DDL = (
    "CREATE TABLE IF NOT EXISTS registry_order (ord INTEGER PRIMARY KEY, "
    "agent_rowid INTEGER NOT NULL, name_key TEXT NOT NULL, id TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS registry_order_agent ON registry_order (agent_rowid)",
    # contentless (rows are given with their values, deletes too), rowid = ord, no sizes kept
    "CREATE VIRTUAL TABLE IF NOT EXISTS registry_words USING fts5(words, content='', "
    "columnsize=0, tokenize=\"unicode61 remove_diacritics 0 tokenchars '_'\")",
    "CREATE VIRTUAL TABLE IF NOT EXISTS registry_names USING fts5(name_key, content='', "
    "columnsize=0, tokenize='trigram case_sensitive 1')",
)
OLD = (  # the layout before registry_order: external-content FTS5 at the agents' rowids
    "DROP TABLE IF EXISTS registry_keys",
    "DROP TABLE IF EXISTS registry_words",
    "DROP TABLE IF EXISTS registry_names",
)
HAS_ORDER = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'registry_order'"
FTS_TABLES = {"registry_words": "words", "registry_names": "name_key"}
_ROWID: ColumnElement[Any] = literal_column("registry_agents.rowid")
_O = ORDER.alias("o")


async def add(conn: AsyncConnection, ids: list[str]) -> None:
    """Give the served rows of ``ids`` their ``registry_order`` row and FTS entries (one
    statement each, whatever the number: FTS5 writes what it holds whenever a rowid comes lower
    than the last, so the rows go in ``ord`` order, all at once)."""
    listed = func.json_each(json.dumps(ids)).table_valued("value")
    served = agents.c.id.in_(select(listed.c.value)) & agents.c.name_key.is_not(None)
    await _place(conn, served, len(ids))
    joined = agents.join(_O, _O.c.agent_rowid == _ROWID)
    for name, col in FTS_TABLES.items():
        fts = table(name, column("rowid"), column(col))
        rows = select(_O.c.ord, agents.c[col]).select_from(joined).where(served)
        await conn.execute(insert(fts).from_select(["rowid", col], rows.order_by(_O.c.ord)))


async def _place(
    conn: AsyncConnection, served: ColumnElement[bool], expected: int | None, start: int = 0
) -> None:
    """``registry_order`` rows for ``served``: each at its first free slot (try ``start`` on;
    the first try's count tells whether any slot was taken, the rest count what is left)."""
    names = ["ord", "agent_rowid", "name_key", "id"]
    unplaced = ~exists().where(ORDER.c.agent_rowid == _ROWID)
    for attempt in range(start, ATTEMPTS + 1):
        if attempt and not await conn.scalar(select(func.count()).where(served, unplaced)):
            return
        if attempt == ATTEMPTS:
            raise RegistryError("too many agent names begin with the same characters")
        key = func.registry_ord(agents.c.name_key, _ROWID, attempt)
        source = select(key, _ROWID, agents.c.name_key, agents.c.id).where(served)
        if attempt:
            source = source.where(unplaced)
        added = await conn.execute(
            insert(ORDER).prefix_with("OR IGNORE").from_select(names, source)
        )
        if attempt == 0 and added.rowcount == expected:
            return


async def remove(conn: AsyncConnection, where: ColumnElement[bool]) -> None:
    """Take the rows ``where`` says out of the FTS tables (with the values they were indexed
    with, as contentless tables need) and out of ``registry_order``."""
    joined = agents.join(_O, _O.c.agent_rowid == _ROWID)
    for name, col in FTS_TABLES.items():
        fts = table(name, column(name), column("rowid"), column(col))
        rows = select(literal("delete"), _O.c.ord, agents.c[col]).select_from(joined).where(where)
        await conn.execute(insert(fts).from_select([name, "rowid", col], rows.order_by(_O.c.ord)))
    rowids = select(_ROWID).where(where)
    await conn.execute(ORDER.delete().where(ORDER.c.agent_rowid.in_(rowids)))


async def build(conn: AsyncConnection, *, refill: bool) -> None:
    """Create the tables; fill them from the served rows when they are new (a file of an older
    version: its text indexes are dropped first) or ``refill`` (after a bulk load)."""
    fresh = not await conn.scalar(text(HAS_ORDER))
    for statement in (*OLD, *DDL) if fresh else DDL:
        await conn.execute(text(statement))
    if not (fresh or refill):
        return
    if refill:
        await conn.execute(text("DELETE FROM registry_order"))
        for name in FTS_TABLES:
            await conn.execute(text(f"INSERT INTO {name}({name}) VALUES ('delete-all')"))
    await add_all(conn)


async def add_all(conn: AsyncConnection) -> None:
    """:func:`add` for every served row, read from the covering indexes of ``registry_agents``
    (its rows hold their cards) and written in ``ord`` order."""
    await conn.execute(text(_FILL_ORDER))
    await _place(conn, agents.c.name_key.is_not(None), None, start=1)  # slots taken twice
    for statement in _FILL_FTS:
        await conn.execute(text(statement))


_FILL_ORDER = (
    "INSERT OR IGNORE INTO registry_order (ord, agent_rowid, name_key, id) "
    "SELECT registry_ord(name_key, rowid, 0), rowid, name_key, id "
    "FROM registry_agents INDEXED BY registry_agents_order WHERE name_key IS NOT NULL"
)
_FILL_FTS = (
    "INSERT INTO registry_names (rowid, name_key) SELECT ord, name_key FROM registry_order",
    "INSERT INTO registry_words (rowid, words) SELECT o.ord, a.words FROM registry_order AS o "
    "JOIN registry_agents AS a INDEXED BY registry_agents_window "
    "ON a.name_key = o.name_key AND a.id = o.id ORDER BY o.ord",
)
