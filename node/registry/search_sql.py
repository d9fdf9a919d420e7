"""One registry search as SQL over the indexes of :mod:`node.registry.schema`.

Rows come in page order, ``(name_key, id)``, after the cursor (the last row's key); a page asks
for one row more than it shows, to know whether another follows. A skill or tag filter drives
the query from ``registry_terms`` (its B-tree is in page order); otherwise the order index does.
Health and eviction are conditions on ``last_seen``.

Free text (``q``) matches when every word of it begins a word of the agent, or when ``q`` (three
characters or more) is part of the name. A query for a common word would make an index lookup
return much of the table, only to sort it for one page; so a text search first walks a window
of :data:`WINDOW` rows in page order, checking each row's own words (:func:`page_statement` with
``window``). If the page fills inside the window it is the answer; only a rarer text then asks
the word and name indexes (``window=None``), sorting the matches by their keys alone and
reading only the page's rows (:func:`_indexed_page`). Both checks mean the same thing, so the
two plans give the same rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    Select,
    and_,
    cast,
    exists,
    false,
    func,
    literal,
    literal_column,
    or_,
    select,
    text,
    tuple_,
)
from sqlalchemy.dialects.postgresql import TSQUERY
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.sql.util import ClauseAdapter

from node.registry.schema import KEYS, PG_WORDS, SKILL, TAG, agents, query_words, terms

Key = tuple[str, str]
WINDOW = 2000
"""Rows a text search walks in page order before it asks the text indexes instead."""
MIN_NAME_PART = 3
"""Shortest ``q`` also matched inside names (the trigram indexes hold nothing shorter)."""


@dataclass(frozen=True, slots=True)
class Filter:
    """What one page asks for; times are on the registry's clock."""

    skill: str | None = None
    tag: str | None = None
    q: str | None = None
    seen_after: float = float("-inf")  # rows last seen before this are evicted: never listed
    healthy: bool | None = None
    healthy_after: float = float("-inf")  # a row is healthy when last seen at or after this
    after: Key | None = None
    limit: int = 50

    @property
    def windowed(self) -> bool:
        """Whether :func:`page_statement` tries a window first (text alone drives the search)."""
        return self.q is not None and self.skill is None and self.tag is None


def page_statement(
    f: Filter, columns: list[Any], dialect: str, *, window: int | None = None
) -> Select[Any]:
    """``SELECT columns, page_key`` (the row's ``name_key``) of up to ``limit`` rows in page
    order; ``columns`` are expressions over ``registry_agents``. With ``window``, only the next
    ``window`` served rows after the cursor are considered (see the module's docstring)."""
    a = agents.c
    where: list[ColumnElement[bool]] = [a.last_seen >= f.seen_after]  # and the page's place
    checked: list[ColumnElement[bool]] = []  # conditions on the row's health and text
    if f.healthy is not None:
        checked.append(
            a.last_seen >= f.healthy_after if f.healthy else a.last_seen < f.healthy_after
        )
    if f.q is not None:
        checked.append(_row_matches(f.q, dialect))
    if window is None and f.windowed:
        return _indexed_page(f, columns, dialect, [*where, *checked])
    driver = None
    for kind, term in ((SKILL, f.skill), (TAG, f.tag)):
        if term is None:
            continue
        if driver is None:
            driver = terms.alias("driver")
            where += [driver.c.kind == kind, driver.c.term == term]
        else:
            also = terms.alias("also")
            where.append(
                exists().where(also.c.kind == kind, also.c.term == term, also.c.agent_id == a.id)
            )
    if driver is not None:
        order = (driver.c.name_key, driver.c.agent_id)
        statement = select(*columns, order[0].label("page_key")).select_from(
            driver.join(agents, a.id == driver.c.agent_id)
        )
    else:
        order = (a.name_key, a.id)
        where.append(a.name_key.is_not(None))
    if f.after is not None:
        where.append(tuple_(*order) > tuple_(*f.after))
    if driver is None:
        statement = select(*columns, order[0].label("page_key"))
    if driver is None and window is not None:
        # the next rows in order, read from the covering index on SQLite; checked in the
        # order they come (the engines read an ordered subquery in order), stopping at a page
        ahead = (
            select(a.id, a.name_key, a.last_seen, a.words)
            .where(*where)
            .order_by(*order)
            .limit(window)
            .subquery("ahead")
        )
        checks = [ClauseAdapter(ahead).traverse(w) for w in (*where, *checked)]
        where = [a.id.in_(select(ahead.c.id).where(*checks).limit(f.limit))]
    else:
        where += checked
    return statement.where(and_(*where)).order_by(*order).limit(f.limit)


def _indexed_page(
    f: Filter, columns: list[Any], dialect: str, checked: list[ColumnElement[bool]]
) -> Select[Any]:
    """A page of a text found by the word and name indexes (``checked``: the conditions on the
    row, text and health). Only the matches' sort keys ``(name_key, id)`` are sorted; the
    page's rows are read after, by key. A fence (``OFFSET 0``) keeps each engine from walking
    the page order and filtering every row (PostgreSQL picks that when it misjudges how many
    rows match: minutes for no match at 1M rows), and from reading every match's whole row
    (a few thousand wide rows, most of them cold, for a part of a common name).

    PostgreSQL checks every condition on the matches (it reads their heap tuples to recheck
    the trigram match anyway) and joins the ``limit`` rows of the page. SQLite takes the keys
    of the matches from the narrow ``registry_keys`` table (:mod:`node.registry.schema`), sorts
    them, and reads rows in that order, checking each, until the page is full."""
    a, k = agents.c, KEYS.c
    if dialect == "postgresql":
        where = [*checked, a.name_key.is_not(None), _indexed_matches(f.q or "", dialect)]
        if f.after is not None:
            where.append(tuple_(a.name_key, a.id) > tuple_(*f.after))
        matched = select(a.id, a.name_key).where(*where).offset(0).subquery("matched")
        page = (
            select(*matched.c)
            .order_by(matched.c.name_key, matched.c.id)
            .limit(f.limit)
            .subquery("page")
        )
        return (
            select(*columns, page.c.name_key.label("page_key"))
            .select_from(page.join(agents, a.id == page.c.id))
            .order_by(page.c.name_key, page.c.id)
        )
    cursor = [tuple_(k.name_key, k.id) > tuple_(*f.after)] if f.after is not None else []
    matched = (
        select(k.agent_rowid, k.name_key, k.id)
        .where(k.agent_rowid.in_(_indexed_rowids(f.q or "")), *cursor)
        .order_by(k.name_key, k.id)
        .offset(0)  # not flattened: sorted alone first, then read in its order
        .subquery("matched")
    )
    row = agents.alias("candidate")  # read for one match at a time, until the page is full
    checks = [ClauseAdapter(row).traverse(w) for w in checked]
    found = exists().where(
        literal_column("candidate.rowid") == matched.c.agent_rowid,
        row.c.name_key.is_not(None),
        *checks,
    )
    first = select(matched.c.agent_rowid).where(found).limit(f.limit)
    return (
        select(*columns, a.name_key.label("page_key"))
        .where(literal_column("registry_agents.rowid").in_(first))
        .order_by(a.name_key, a.id)
    )


def _row_matches(q: str, dialect: str) -> ColumnElement[bool]:
    """The row's own words and name match ``q`` (checked row by row)."""
    a = agents.c
    contains = func.strpos if dialect == "postgresql" else func.instr
    spaced = literal(" ") + a.words
    every = [contains(spaced, " " + w) > 0 for w in query_words(q)]
    either: list[ColumnElement[bool]] = [and_(*every)] if every else []
    if len(q) >= MIN_NAME_PART:
        either.append(contains(a.name_key, q.casefold()) > 0)
    return or_(*either) if either else false()


def _indexed_matches(q: str, dialect: str) -> ColumnElement[bool]:
    """The same as :func:`_row_matches`, through the word and name indexes."""
    words, needle = query_words(q), q.casefold()
    if dialect == "postgresql":
        either: list[ColumnElement[bool]] = []
        if words:
            query = " & ".join(_lexeme(w) + ":*" for w in words)
            either.append(literal_column(PG_WORDS).bool_op("@@")(cast(query, TSQUERY)))
        if len(q) >= MIN_NAME_PART:
            escaped = needle.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            either.append(agents.c.name_key.like(f"%{escaped}%", escape="\\"))
        return or_(*either) if either else false()
    return literal_column("registry_agents.rowid").in_(_indexed_rowids(q))


def _indexed_rowids(q: str) -> Any:
    """SQLite: the rowids the word and name FTS5 tables find for ``q`` (a ``UNION``)."""
    words, needle = query_words(q), q.casefold()
    parts, params = [], {}
    if words:
        parts.append("SELECT rowid FROM registry_words WHERE registry_words MATCH :words")
        params["words"] = " AND ".join(_phrase(w) + "*" for w in words)
    if len(q) >= MIN_NAME_PART:
        parts.append("SELECT rowid FROM registry_names WHERE registry_names MATCH :name")
        params["name"] = _phrase(needle)
    if not parts:
        parts.append("SELECT NULL AS rowid WHERE 0")
    return text(" UNION ".join(parts)).bindparams(**params).columns(literal_column("rowid"))


def _lexeme(word: str) -> str:
    return "'" + word.replace("\\", "\\\\").replace("'", "''") + "'"


def _phrase(word: str) -> str:
    return '"' + word.replace('"', '""') + '"'
