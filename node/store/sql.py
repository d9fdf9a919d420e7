"""SQL shared by the SQLite and PostgreSQL stores: rows, the guarded upsert, ``ListTasks``.

A task is one row ``(owner, id, context_id, state, ts_ns, data, message_id, created_ns)``; the
upsert refuses to change a terminal row (:mod:`node.store.terminal`) and reports the rows it
wrote, ``message_id``/``created_ns`` are set only when the row is created (:mod:`node.store.sends`).
Every id is checked by :mod:`node.store.ids` before it reaches SQL.

``ListTasks`` has the same semantics as the SDK's stores: filters ``context_id``, ``status`` and
``status_timestamp_after``; order ``(has timestamp, timestamp, id)`` descending; page tokens are the
SDK's cursors (``encode_list_tasks_cursor``), legacy task-id tokens are still accepted. Timestamps
are kept as nanoseconds clamped to the signed 64-bit range both databases can index.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from a2a.types import ListTasksRequest, ListTasksResponse, Task
from a2a.utils.constants import DEFAULT_LIST_TASKS_PAGE_SIZE
from a2a.utils.errors import InvalidParamsError
from a2a.utils.task import (
    ListTasksCursor,
    decode_list_tasks_cursor,
    decode_page_token,
    encode_list_tasks_cursor,
    validate_page_size,
)

from node.errors import ConfigError
from node.store.ids import check_id, check_owner, id_problem
from node.store.recovery import RUNNING_STATES
from node.store.sends import creating_message_id
from node.store.terminal import TERMINAL_STATES_SQL

_I64_MIN, _I64_MAX = -(2**63), 2**63 - 1
_TABLE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")
LIVE_STATES = ", ".join(str(int(s)) for s in RUNNING_STATES)
"""The states an orphaned task is left in, as an SQL list, e.g. ``state IN (1, 2)``."""


def check_table_name(table: str) -> str:
    """``table`` if it is a plain SQL identifier, else ``ConfigError``."""
    if not _TABLE_NAME.match(table):
        raise ConfigError(f"invalid table name {table!r}: letters, digits, _ (max 63)")
    return table


def clamp_ns(ns: int) -> int:
    """``ns`` clamped to what an SQL BIGINT holds (years before 1678 or after 2262 collapse)."""
    return min(max(ns, _I64_MIN), _I64_MAX)


def task_ts_ns(task: Task) -> int | None:
    """The sort timestamp of ``task`` (its status timestamp) or ``None`` when it has none."""
    if not task.status.HasField("timestamp"):
        return None
    return clamp_ns(task.status.timestamp.ToNanoseconds())


def task_row(task: Task, owner: str) -> tuple[Any, ...]:
    """The row that stores ``task`` for ``owner``; ``InvalidParamsError`` for an invalid id."""
    check_owner(owner)
    check_id(task.id, "id")
    check_id(task.context_id, "contextId")
    return (
        owner,
        task.id,
        task.context_id,
        task.status.state,
        task_ts_ns(task),
        task.SerializeToString(),
        creating_message_id(task),
        time.time_ns(),
    )


ROW_WIDTH = 8
"""Values per :func:`task_row`."""


def upsert_sql(table: str, values: str) -> str:
    """Insert or update rows ``values``; a terminal row changes only to identical data.

    ``RETURNING owner, id`` lists the rows written, so a missing row is a refused save. A new
    row gets version 1 (the column's default), an updated one its version + 1.
    """
    t = table
    return (
        f"INSERT INTO {t} (owner, id, context_id, state, ts_ns, data, message_id, created_ns)"
        f" VALUES {values} ON CONFLICT (owner, id) DO UPDATE SET"
        " context_id = excluded.context_id, state = excluded.state,"
        f" ts_ns = excluded.ts_ns, data = excluded.data, version = {t}.version + 1"
        f" WHERE {t}.state NOT IN ({TERMINAL_STATES_SQL}) OR {t}.data = excluded.data"
        " RETURNING owner, id"
    )


def find_by_message_sql(table: str, placeholder: str) -> str:
    """The newest task of owner ``1`` created by message ``2`` at or after ``3`` (ns)."""
    p = placeholder
    return (
        f"SELECT data FROM {table} WHERE owner = {p}1 AND message_id = {p}2"
        f" AND created_ns >= {p}3 ORDER BY created_ns DESC LIMIT 1"
    )


def next_token(ts_ns: int | None, task_id: str) -> str:
    """The page token that continues after the row ``(ts_ns, task_id)``."""
    return encode_list_tasks_cursor(ListTasksCursor(timestamp_ns=ts_ns, task_id=task_id))


def parse_token(token: str) -> tuple[ListTasksCursor | None, str | None]:
    """``(cursor, None)`` for a cursor token, ``(None, first_task_id)`` for a legacy one.

    Raises ``InvalidParamsError`` for a token that is neither, or whose task id is not a valid id
    (:mod:`node.store.ids`).
    """
    if not token:
        return None, None
    cursor = decode_list_tasks_cursor(token)
    if cursor is not None:
        if cursor.timestamp_ns is not None and clamp_ns(cursor.timestamp_ns) != cursor.timestamp_ns:
            raise InvalidParamsError("Invalid page token")
        if id_problem(cursor.task_id):
            raise InvalidParamsError("Invalid page token")
        return cursor, None
    legacy_id = decode_page_token(token)
    if id_problem(legacy_id):
        raise InvalidParamsError("Invalid page token")
    return None, legacy_id


def check_list_params(params: ListTasksRequest, owner: str) -> None:
    """``InvalidParamsError`` for an owner or ``contextId`` filter that is not a valid id."""
    check_owner(owner)
    check_id(params.context_id, "contextId")


def page_size(params: ListTasksRequest) -> int:
    """The requested page size (default ``DEFAULT_LIST_TASKS_PAGE_SIZE``), validated to 1..100."""
    if params.HasField("page_size"):
        validate_page_size(params.page_size)
    return params.page_size or DEFAULT_LIST_TASKS_PAGE_SIZE


@dataclass(frozen=True)
class ListQuery:
    """The two statements of one ``ListTasks`` page (count and page), with their arguments."""

    count_sql: str
    count_args: list[object]
    page_sql: str
    page_args: list[object]
    limit: int


def build_list_query(
    params: ListTasksRequest,
    owner: str,
    *,
    table: str,
    placeholder: str,
    order_by: str,
    start: ListTasksCursor | None = None,
    inclusive: bool = False,
) -> ListQuery:
    """SQL for one page; ``placeholder`` is ``"?"`` (SQLite) or ``"$"`` (PostgreSQL).

    ``start`` is the cursor position; rows strictly after it are listed, or from it on when
    ``inclusive`` (legacy tokens name the first task of the page).
    """
    args: list[object] = []

    def arg(value: object) -> str:
        args.append(value)
        return f"{placeholder}{len(args)}"

    where = [f"owner = {arg(owner)}"]
    if params.context_id:
        where.append(f"context_id = {arg(params.context_id)}")
    if params.status:
        where.append(f"state = {arg(int(params.status))}")
    if params.HasField("status_timestamp_after"):
        after_ns = clamp_ns(params.status_timestamp_after.ToNanoseconds())
        where.append(f"ts_ns >= {arg(after_ns)}")
    count_sql = f"SELECT count(*) FROM {table} WHERE {' AND '.join(where)}"
    count_args = list(args)
    if start is not None:
        id_op = "<=" if inclusive else "<"
        if start.timestamp_ns is None:
            where.append(f"(ts_ns IS NULL AND id {id_op} {arg(start.task_id)})")
        else:
            ts, tid = arg(start.timestamp_ns), arg(start.task_id)
            where.append(f"(ts_ns < {ts} OR (ts_ns = {ts} AND id {id_op} {tid}) OR ts_ns IS NULL)")
    limit = page_size(params)
    page_sql = (
        f"SELECT ts_ns, id, data FROM {table} WHERE {' AND '.join(where)} "
        f"ORDER BY {order_by} LIMIT {arg(limit + 1)}"
    )
    return ListQuery(count_sql, count_args, page_sql, args, limit)


def page_response(rows: Sequence[Sequence[Any]], total: int, limit: int) -> ListTasksResponse:
    """The response for ``rows`` of ``(ts_ns, id, data)`` fetched with ``LIMIT limit + 1``."""
    page = rows[:limit]
    token = next_token(page[-1][0], page[-1][1]) if len(rows) > limit else None
    return ListTasksResponse(
        tasks=[Task.FromString(row[2]) for row in page],
        total_size=total,
        next_page_token=token,
        page_size=limit,
    )


# -- versioned writes (node.store.versioned) ------------------------------------------------


def cas_insert_sql(table: str, p: str, *, lease: tuple[str, str] | None = None) -> str:
    """Create the row of :func:`task_row` (args 1-8) at version 1; no row returned if it exists.

    ``lease`` names the placeholders of the ``runner`` and ``lease_ns`` columns (PostgreSQL).
    """
    args = ", ".join(f"{p}{i}" for i in range(1, ROW_WIDTH + 1))
    cols, vals = (", runner, lease_ns", f", {lease[0]}, {lease[1]}") if lease else ("", "")
    return (
        f"INSERT INTO {table} (owner, id, context_id, state, ts_ns, data, message_id, created_ns,"
        f" version{cols}) VALUES ({args}, 1{vals})"
        " ON CONFLICT (owner, id) DO NOTHING RETURNING version"
    )


def cas_update_sql(
    table: str, p: str, *, cancel: bool, lease: tuple[str, str] | None = None
) -> str:
    """Update a live row to args 3-6 (of :func:`task_row`); unless ``cancel``, only at version 7.

    Returns the new version, or no row when the stored task is terminal, absent or newer.
    ``lease`` as in :func:`cas_insert_sql`.
    """
    check = "" if cancel else f" AND version = {p}7"
    leased = f", runner = {lease[0]}, lease_ns = {lease[1]}" if lease else ""
    return (
        f"UPDATE {table} SET context_id = {p}3, state = {p}4, ts_ns = {p}5, data = {p}6,"
        f" version = version + 1{leased} WHERE owner = {p}1 AND id = {p}2"
        f" AND state NOT IN ({TERMINAL_STATES_SQL}){check} RETURNING version"
    )


def event_insert_sql(table: str, p: str) -> str:
    """Append one event row ``(owner, task_id, seq, data, created_ns)`` = args 1-5."""
    return (
        f"INSERT INTO {table}_events (owner, task_id, seq, data, created_ns)"
        f" VALUES ({p}1, {p}2, {p}3, {p}4, {p}5)"
    )


def events_after_sql(table: str, p: str) -> str:
    """The events of task 1 with ``seq`` above 2, in order."""
    return f"SELECT seq, data FROM {table}_events WHERE task_id = {p}1 AND seq > {p}2 ORDER BY seq"


def prune_events_sql(table: str, p: str) -> str:
    """Delete the event rows written before 1 (ns)."""
    return f"DELETE FROM {table}_events WHERE created_ns < {p}1"


def prune_tasks_sql(table: str, p: str) -> str:
    """Delete the terminal tasks last changed before 1 (ns)."""
    return (
        f"DELETE FROM {table} WHERE state IN ({TERMINAL_STATES_SQL})"
        f" AND COALESCE(ts_ns, created_ns, 0) < {p}1"
    )
