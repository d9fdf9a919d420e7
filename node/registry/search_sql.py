"""One registry search as SQL over the indexes of :mod:`node.registry.schema`.

Rows come in page order, ``(name_key, id)``, after the cursor (the last row's key); a page asks
for one row more than it shows, to know whether another follows. A skill or tag filter drives
the query from ``registry_terms`` (its B-tree is in page order); otherwise the order index does.
Health and eviction are conditions on ``last_seen``.

Free text (``q``) matches when every word of it begins a word of the agent, or when ``q`` (three
characters or more) is part of the name. A query for a common word would make an index lookup
return much of the table, only to sort it for one page; so a text search first walks a window
of :data:`WINDOW` rows in page order, checking each row's own words (:func:`page_statement` with
``window``; on SQLite only when one of the first :data:`PROBE` rows matches). If the page fills
inside the window it is the answer; only a rarer text then asks the word and name indexes
(``window=None``): on SQLite their matches come in page order up to ties and are read until a
page is full (:func:`_indexed_page`); on PostgreSQL they are sorted by their keys alone and only
the page's rows are read. Both checks mean the same thing, so the two plans give the same rows.
On PostgreSQL both plans of a text alone read the narrow ``registry_search``
(:func:`_pg_text_page`), not the wide rows.

A statement's values are bound parameters: one statement is built per shape of query (which
filters, how many words) and kept, since building it cost more CPU than the database spent.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    Float,
    Integer,
    Select,
    Text,
    and_,
    bindparam,
    case,
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
    union,
)
from sqlalchemy.dialects.postgresql import TSQUERY
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.sql.util import ClauseAdapter

from node.registry.name_order import GROUP, lowest
from node.registry.schema import SKILL, TAG, agents, query_words, terms
from node.registry.search_table import SEARCH, WORDS

Key = tuple[str, str]
WINDOW = 2000
"""Rows a text search walks in page order before it asks the text indexes instead."""
PROBE = 200
"""Rows walked first: when none of them matches, the text is too rare for the window to fill
a page, and the text indexes answer at once."""
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


@dataclass(frozen=True, slots=True)
class _Shape:
    """What decides a page statement's SQL (its values are parameters, see :func:`_values`)."""

    skill: bool
    tag: bool
    q: bool
    words: int  # words of q
    name_part: bool  # q long enough to be looked for inside names
    healthy: bool | None
    after: bool
    dialect: str
    window: int | None


_P = {
    name: bindparam(name, type_=kind)
    for name, kind in (
        ("seen_after", Float()),
        ("healthy_after", Float()),
        ("after_key", Text()),
        ("after_id", Text()),
        ("limit", Integer()),
        ("skill", Text()),
        ("tag", Text()),
        ("needle", Text()),
        ("pattern", Text()),
        ("tsquery", Text()),
        ("fts_words", Text()),
        ("fts_name", Text()),
    )
}
_CACHE: dict[tuple[_Shape, int], tuple[list[Any], Select[Any]]] = {}
_CACHED_WORDS = 8
"""Statements of queries with more words are built each time (not kept)."""
_CACHED_SHAPES = 512


def page_statement(
    f: Filter, columns: list[Any], dialect: str, *, window: int | None = None
) -> tuple[Select[Any], dict[str, Any]]:
    """``SELECT columns, page_key`` (the row's ``name_key``) of up to ``limit`` rows in page
    order, and its parameters; ``columns`` are expressions over ``registry_agents`` (a list
    the caller keeps: statements are built once per shape of query and kept, as building one
    costs more CPU than running it). With ``window``, only the next ``window`` served rows
    after the cursor are considered (see the module's docstring)."""
    words = query_words(f.q) if f.q is not None else []
    shape = _Shape(
        skill=f.skill is not None,
        tag=f.tag is not None,
        q=f.q is not None,
        words=len(words),
        name_part=f.q is not None and len(f.q) >= MIN_NAME_PART,
        healthy=f.healthy,
        after=f.after is not None,
        dialect=dialect,
        window=window if f.windowed else None,
    )
    values = _values(f, words, shape)
    key = (shape, id(columns))
    if (hit := _CACHE.get(key)) is not None and hit[0] is columns:
        return hit[1], values
    statement = _statement(shape, columns)
    if shape.words <= _CACHED_WORDS:
        if len(_CACHE) >= _CACHED_SHAPES:  # stores come and go (tests): start over
            _CACHE.clear()
        _CACHE[key] = (columns, statement)
    return statement, values


def _values(f: Filter, words: list[str], shape: _Shape) -> dict[str, Any]:
    out: dict[str, Any] = {"seen_after": f.seen_after, "limit": f.limit}
    if f.healthy is not None:
        out["healthy_after"] = f.healthy_after
    if f.after is not None:
        out["after_key"], out["after_id"] = f.after
    out["lo"] = lowest(f.after[0]) if f.after is not None else 0
    if f.skill is not None:
        out["skill"] = f.skill
    if f.tag is not None:
        out["tag"] = f.tag
    for i, w in enumerate(words):
        out[f"w{i}"], out[f"sw{i}"] = w, " " + w
    if f.q is not None:
        needle = f.q.casefold()
        out["needle"] = needle
        if words:
            out["tsquery"] = " & ".join(_lexeme(w) + ":*" for w in words)
            out["fts_words"] = " AND ".join(_phrase(w) + "*" for w in words)
        if shape.name_part:
            escaped = needle.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            out["pattern"] = f"%{escaped}%"
            out["fts_name"] = _phrase(needle)
    return out


def _statement(shape: _Shape, columns: list[Any]) -> Select[Any]:
    a, p = agents.c, _P
    where: list[ColumnElement[bool]] = [a.last_seen >= p["seen_after"]]  # and the page's place
    checked: list[ColumnElement[bool]] = []  # conditions on the row's health and text
    if shape.healthy is not None:
        after = p["healthy_after"]
        checked.append(a.last_seen >= after if shape.healthy else a.last_seen < after)
    if shape.q:
        checked.append(_row_matches(shape, a.words, a.name_key))
    windowed = shape.q and not shape.skill and not shape.tag
    if windowed and shape.dialect == "postgresql":
        return _pg_text_page(shape, columns)
    if shape.window is None and windowed:
        return _indexed_page(shape, columns)
    driver = None
    for kind, present, term in ((SKILL, shape.skill, p["skill"]), (TAG, shape.tag, p["tag"])):
        if not present:
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
    if shape.after:
        where.append(tuple_(*order) > tuple_(p["after_key"], p["after_id"]))
    if driver is None:
        statement = select(*columns, order[0].label("page_key"))
    if driver is None and shape.window is not None:
        # the next rows in order, read from the covering index on SQLite; checked in the
        # order they come (the engines read an ordered subquery in order), stopping at a page;
        # only when one of the first PROBE rows matches (else the text is rare: no rows)
        def ahead(rows: Any, name: str) -> Select[Any]:
            near = (
                select(a.id, a.name_key, a.last_seen, a.words)
                .where(*where)
                .order_by(*order)
                .limit(rows)
                .subquery(name)
            )
            checks = [ClauseAdapter(near).traverse(w) for w in (*where, *checked)]
            return select(near.c.id).where(*checks)

        probe = exists(ahead(min(PROBE, shape.window), "probe"))  # tested once, first
        rows = case((probe, shape.window), else_=0)
        where = [a.id.in_(ahead(rows, "ahead").limit(p["limit"]))]
    else:
        where += checked
    return statement.where(and_(*where)).order_by(*order).limit(p["limit"])


def _indexed_page(shape: _Shape, columns: list[Any]) -> Select[Any]:
    """SQLite: a page of a text found by the word and name FTS5 tables, whose rowids are in page
    order up to ties (:mod:`node.registry.name_order`). Their matches are merged as they come
    (a ``UNION`` of two ordered streams, read lazily) and checked one at a time (health) until
    ``limit`` pass; the ``ord`` groups up to the last of them hold every row the page can show,
    so only those matches are read again, sorted exactly by ``(name_key, id)`` and checked in
    that order until the page is full. A part of a common name thus reads a page of matches
    and one group, not every match."""
    served = ["c.name_key IS NOT NULL", "c.last_seen >= :seen_after"]
    if shape.healthy is not None:
        served.append(f"c.last_seen {'>=' if shape.healthy else '<'} :healthy_after")
    cursor = ["(o.name_key, o.id) > (:after_key, :after_id)"] * shape.after

    def live(row: str) -> str:
        return (
            "EXISTS (SELECT 1 FROM registry_agents AS c "
            f"WHERE c.rowid = {row}.agent_rowid AND {' AND '.join(served)})"
        )

    def matches(upto: str) -> str:
        parts = [
            f"SELECT rowid AS ord FROM {name} WHERE {name} MATCH :{param} AND rowid >= :lo{upto}"
            for name, param, present in (
                ("registry_words", "fts_words", shape.words),
                ("registry_names", "fts_name", shape.name_part),
            )
            if present
        ] or ["SELECT NULL AS ord WHERE 0"]
        # LIMIT keeps the ORDER BY (a merge of the ordered streams); CROSS JOIN keeps this
        # stream the outer loop (read as it comes, not first stored whole)
        return (
            f"({' UNION '.join(parts)} ORDER BY 1 LIMIT -1) AS s "
            "CROSS JOIN registry_order AS o ON o.ord = s.ord"
        )

    def where(*conditions: str) -> str:
        return f" WHERE {' AND '.join(conditions)}" if conditions else ""

    edge = (
        f"SELECT max(ord) | {GROUP} FROM (SELECT o.ord FROM {matches('')}"
        f"{where(*cursor, live('o'))} LIMIT :limit)"
    )
    upto = matches(" AND rowid <= (SELECT hi FROM edge)")
    page = (
        f"WITH edge(hi) AS MATERIALIZED ({edge}) SELECT m.agent_rowid FROM ("
        f"SELECT o.name_key, o.id, o.agent_rowid FROM {upto}"
        f"{where(*cursor)} ORDER BY o.name_key, o.id LIMIT -1 OFFSET 0) AS m"
        f"{where(live('m'))} LIMIT :limit"
    )
    a = agents.c
    rowids = text(page).columns(literal_column("agent_rowid"))
    return (
        select(*columns, a.name_key.label("page_key"))
        .where(literal_column("registry_agents.rowid").in_(rowids))
        .order_by(a.name_key, a.id)
    )


def _pg_text_page(shape: _Shape, columns: list[Any]) -> Select[Any]:
    """PostgreSQL: a page of a text alone, found in the narrow ``registry_search``
    (:mod:`node.registry.search_table`): with a window, the next rows of it in page order,
    each checked; without, the matches of the word index and of the trigram index (a
    ``UNION``: an ``OR`` of the two would recheck both conditions on every match, building a
    ``tsvector`` for each), sorted by their keys alone behind a fence (``OFFSET 0``, else the
    planner may walk the page order filtering every row). The candidates are then taken in
    order, each one's wide row looked up for its health (a scalar subquery: never turned into
    a join over every match), until the page is full; only the page's rows are read whole."""
    s, p = SEARCH.c, _P
    key = (s.name_key, s.agent_id)
    cursor = [tuple_(*key) > tuple_(p["after_key"], p["after_id"])] * shape.after
    if shape.window is not None:
        ahead = select(*s).where(*cursor).order_by(*key).limit(shape.window).subquery("ahead")
        found = ahead
        text_ok = [_row_matches(shape, ahead.c.words, ahead.c.name_key)]
    else:
        parts: list[Select[Any]] = []
        if shape.words:
            hit = literal_column(WORDS).bool_op("@@")(cast(p["tsquery"], TSQUERY))
            parts.append(select(*key).where(hit, *cursor))
        if shape.name_part:
            parts.append(select(*key).where(s.name_key.like(p["pattern"], escape="\\"), *cursor))
        if not parts:
            parts.append(select(*key).where(false()))
        matches = union(*parts).subquery("matches")
        found = (
            select(*matches.c)
            .order_by(matches.c.name_key, matches.c.agent_id)
            .offset(0)
            .subquery("matched")
        )
        text_ok = []
    row = agents.alias("candidate")
    live = [row.c.last_seen >= p["seen_after"]]
    if shape.healthy is not None:
        after = p["healthy_after"]
        live.append(row.c.last_seen >= after if shape.healthy else row.c.last_seen < after)
    served = (
        select(literal(True))
        .where(row.c.id == found.c.agent_id, row.c.name_key.is_not(None), *live)
        .scalar_subquery()
    )
    page = (
        select(found.c.agent_id, found.c.name_key)
        .where(*text_ok, served.is_not(None))
        .order_by(found.c.name_key, found.c.agent_id)
        .limit(p["limit"])
        .subquery("page")
    )
    a = agents.c
    return (
        select(*columns, page.c.name_key.label("page_key"))
        .select_from(page.join(agents, a.id == page.c.agent_id))
        .order_by(page.c.name_key, page.c.agent_id)
    )


def _row_matches(shape: _Shape, words: Any, key: Any) -> ColumnElement[bool]:
    """The row's own ``words`` and name (``key``) match the query (checked row by row). A word
    is first looked for anywhere in the words: most rows fail there, before the text is copied
    with a space in front to check that the word begins one of them."""
    contains = func.strpos if shape.dialect == "postgresql" else func.instr
    spaced = literal(" ") + words
    every = [
        and_(
            contains(words, bindparam(f"w{i}", type_=Text())) > 0,
            contains(spaced, bindparam(f"sw{i}", type_=Text())) > 0,
        )
        for i in range(shape.words)
    ]
    either: list[ColumnElement[bool]] = [and_(*every)] if every else []
    if shape.name_part:
        either.append(contains(key, _P["needle"]) > 0)
    return or_(*either) if either else false()


def _lexeme(word: str) -> str:
    return "'" + word.replace("\\", "\\\\").replace("'", "''") + "'"


def _phrase(word: str) -> str:
    return '"' + word.replace('"', '""') + '"'
