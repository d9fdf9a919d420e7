"""The ids a task store keys on: one limit for every store, refused as invalid params.

A task id, context id, message id, owner (the principal name) and the task id inside a
``ListTasks`` page token must be **at most 256 characters with no control characters** (Unicode
category Cc: U+0000-U+001F, U+007F-U+009F) and no unpaired surrogates. Anything else is refused
with ``a2a.utils.errors.InvalidParamsError`` naming the field: JSON-RPC -32602, REST HTTP 400.

Why a limit rather than hashing: PostgreSQL cannot store NUL in TEXT and refuses index rows
over ~2,700 bytes (``(owner, context_id)`` with a 2,800-character random context id), while
SQLite and the in-memory store accept both, so the same request used to succeed on one node and
fail with -32603 on another. 256 characters (at most 1 KiB of UTF-8 each) keep every index key
of both SQL stores far below PostgreSQL's limit; ids are server-generated UUIDs (36 characters)
and client context ids are usually UUIDs too. The request handler checks the message's ids before
anything runs; the stores check again in ``save``, ``get``, ``list`` and ``delete`` so that no
caller reaches the database with an id it cannot store.

Tasks stored before this limit with longer context ids stay readable and listable; they can no
longer be updated or filtered by that context id.
"""

from __future__ import annotations

import re

from a2a.utils.errors import InvalidParamsError

MAX_ID_CHARS = 256
_FORBIDDEN = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff]")


def id_problem(value: str) -> str | None:
    """Why ``value`` cannot be a stored id, or ``None`` when it can (the empty id can)."""
    if len(value) > MAX_ID_CHARS:
        return f"is {len(value)} characters long (at most {MAX_ID_CHARS})"
    found = _FORBIDDEN.search(value)
    if found is not None:
        return f"contains the control character U+{ord(found.group()):04X}"
    return None


def check_id(value: str, field: str) -> str:
    """``value`` if it is a valid id, else ``InvalidParamsError`` naming ``field``."""
    problem = id_problem(value)
    if problem is not None:
        raise InvalidParamsError(f"{field} {problem}")
    return value


def check_owner(owner: str) -> str:
    """The task owner (principal name) under the same rule as ids."""
    return check_id(owner, "owner (principal name)")
