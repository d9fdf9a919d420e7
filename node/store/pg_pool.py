"""asyncpg pools of the PostgreSQL stores: one round trip per statement, not two.

asyncpg's pool resets every connection it takes back (``SELECT pg_advisory_unlock_all(); CLOSE
ALL; UNLISTEN *; RESET ALL``): one more round trip after each statement, on the caller's path
(``async with pool.acquire()`` awaits it). On a replica this doubled the round trips of every
task save, event read and push config lookup, and cost ~18 % of its CPU in a cross-replica burst
(``bench/cross_replica.py``). The stores' pool connections never change session state that
would leak to the next user: no ``SET``, no session advisory locks (only ``pg_advisory_xact_lock``,
released at commit), no ``LISTEN`` (listeners and the replica lock have connections of their
own), no cursors outside transactions. So :func:`create_pool` passes a ``reset`` that does
nothing; asyncpg still rolls back a transaction left open and drops callbacks on release.
"""

from __future__ import annotations

from typing import Any

import asyncpg


async def _keep_session(_conn: asyncpg.Connection) -> None:
    """The pool's reset hook: nothing to undo (see module docs)."""


async def create_pool(dsn: str, *, min_size: int, max_size: int) -> asyncpg.Pool:
    """An asyncpg pool of ``dsn`` whose connections are not reset on release."""
    pool: Any = await asyncpg.create_pool(
        dsn, min_size=min_size, max_size=max_size, reset=_keep_session
    )
    assert isinstance(pool, asyncpg.Pool)
    return pool
