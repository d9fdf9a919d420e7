"""One registry search as one SQL statement over the indexes of :mod:`node.registry.schema`.

A skill or tag filter drives the query from ``registry_terms`` (walking its B-tree in page
order); otherwise the ``(name_key, id)`` index does. Free text adds a trigram-indexed substring
match; health and eviction are conditions on ``last_seen``. The cursor is the last row's
``(name_key, id)``; a page asks for one row more than it shows, to know whether another follows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import Select, and_, exists, false, func, literal_column, select, text, tuple_
from sqlalchemy.sql.elements import ColumnElement

from node.registry.schema import SEPARATOR, SKILL, TAG, agents, terms

Key = tuple[str, str]


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


def page_statement(f: Filter, columns: list[Any], dialect: str) -> Select[Any]:
    """``SELECT columns, page_key`` (the row's ``name_key``) of up to ``limit`` rows, in page
    order; ``columns`` are expressions over ``registry_agents``."""
    a = agents.c
    driver = None
    where: list[ColumnElement[bool]] = [a.last_seen >= f.seen_after]
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
    else:
        order = (a.name_key, a.id)
        where.append(a.name_key.is_not(None))
    if f.after is not None:
        where.append(tuple_(*order) > tuple_(*f.after))
    if f.healthy is not None:
        where.append(a.last_seen >= f.healthy_after if f.healthy else a.last_seen < f.healthy_after)
    if f.q is not None:
        where.append(text_match(f.q.casefold(), dialect))
    statement = select(*columns, order[0].label("page_key"))
    if driver is not None:
        statement = statement.select_from(driver.join(agents, a.id == driver.c.agent_id))
    return statement.where(and_(*where)).order_by(*order).limit(f.limit)


def text_match(needle: str, dialect: str) -> ColumnElement[bool]:
    """``search_text`` contains ``needle`` (already casefolded), through the trigram index."""
    a = agents.c
    if SEPARATOR in needle:
        return false()
    if dialect == "postgresql":  # pg_trgm's GIN index serves LIKE '%needle%'
        escaped = needle.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        return a.search_text.like(f"%{escaped}%", escape="\\")
    found = func.instr(a.search_text, needle) > 0
    if len(needle) < 3:  # no trigram in it: checked row by row
        return found
    candidates = text("SELECT rowid FROM registry_fts WHERE registry_fts MATCH :phrase")
    phrase = '"' + needle.replace('"', '""') + '"'
    return and_(
        literal_column("registry_agents.rowid").in_(candidates.bindparams(phrase=phrase)),
        found,  # the row's own text decides, should the FTS table ever disagree with it
    )
