"""Open the task store a card or the command line names.

Accepted forms:

- ``memory``: :class:`~node.store.memory.MemoryTaskStore`, the SDK's InMemoryTaskStore with the
  guards of the durable stores (lost on restart);
- ``sqlite``: ``<data_dir>/tasks.db``;
- ``sqlite:///relative/x.db`` (under ``data_dir``) or ``sqlite:////absolute/x.db``, optionally
  with ``?synchronous=FULL`` (see :mod:`node.store.sqlite` for what each level can lose);
- ``postgresql://…`` or ``postgres://…``: PostgreSQL through asyncpg (the ``postgres`` extra),
  optionally with ``?table=name`` (default ``tasks``) so that several nodes share one database,
  and ``?lease_s=`` (default 15), the lease of a running task (:mod:`node.store.cluster`).
"""

from __future__ import annotations

from pathlib import Path
from typing import cast
from urllib.parse import parse_qsl, urlencode

from node.errors import ConfigError
from node.store.lifecycle import NodeTaskStore
from node.store.memory import MemoryTaskStore
from node.store.sqlite import SqliteTaskStore, Synchronous

ACCEPTED = (
    "'memory', 'sqlite', 'sqlite:///relative/path.db', 'sqlite:////absolute/path.db' "
    "(optionally '?synchronous=FULL'), 'postgresql://user:password@host:port/db' or 'postgres://…'"
    " (optionally '?table=name&lease_s=15')"
)


def open_task_store(url_or_kind: str, data_dir: Path) -> NodeTaskStore:
    """The store ``url_or_kind`` names; it connects on ``await store.initialize()`` or first use."""
    spec = url_or_kind.strip()
    scheme, _, rest = spec.partition("://")
    if spec == "memory":
        return MemoryTaskStore()
    if spec == "sqlite":
        return SqliteTaskStore(data_dir / "tasks.db")
    if scheme == "sqlite" and rest.startswith("/") and len(rest) > 1:
        path, _, query = rest[1:].partition("?")
        options = dict(parse_qsl(query, keep_blank_values=True))
        synchronous = options.pop("synchronous", "NORMAL").upper()
        if options or synchronous not in ("NORMAL", "FULL"):
            raise ConfigError(f"task store {spec!r}: the only option is synchronous=NORMAL|FULL")
        return SqliteTaskStore(data_dir / path, synchronous=cast(Synchronous, synchronous))
    if scheme in ("postgresql", "postgres", "postgresql+asyncpg") and rest:
        try:
            from node.store.postgres import DEFAULT_LEASE_S, PostgresTaskStore
        except ImportError as exc:
            raise ConfigError(
                "a PostgreSQL task store needs asyncpg: pip install 'a2a-node[postgres]'"
            ) from exc
        base, _, query = rest.partition("?")
        pairs = parse_qsl(query, keep_blank_values=True)
        ours = {k: v for k, v in pairs if k in ("table", "lease_s")}
        others = urlencode([(k, v) for k, v in pairs if k not in ours])
        dsn = f"postgresql://{base}" + (f"?{others}" if others else "")
        try:
            lease_s = float(ours.get("lease_s", DEFAULT_LEASE_S))
        except ValueError:
            raise ConfigError("task store: lease_s must be a number of seconds") from None
        return PostgresTaskStore(dsn, table=ours.get("table", "tasks"), lease_s=lease_s)
    shown = f"{scheme}://…" if "@" in spec else spec  # never echo a password
    raise ConfigError(f"unknown task store {shown!r}; expected one of {ACCEPTED}")
