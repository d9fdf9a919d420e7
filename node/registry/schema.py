"""The registry's tables, and what each agent row is indexed by for search.

``registry_agents`` holds one row per agent; besides what the API serves, each row written by
the registry carries what searches use (:mod:`node.registry.search_sql` queries it):

- ``name_key``: the casefolded name (cut at :data:`NAME_KEY_CHARS`); pages follow
  ``(name_key, id)`` through a B-tree on both (keyset pagination: a page never shifts when
  agents register meanwhile). ``NULL`` marks a row that is not served: written behind the
  registry's back or by an older version (checked at start, see
  :meth:`AgentStore.check_unserved`), or set aside as unreadable.
- ``registry_terms``: one row per (skill id or tag, agent), with the agent's ``name_key``, and a
  B-tree on ``(kind, term, name_key, agent_id)``: a skill or tag filter walks its matches in page
  order and stops after one page. (A GIN index over arrays answers the same filter with an
  unordered bitmap, so every page would first sort all of its matches.) Deleting an agent
  deletes its terms (``ON DELETE CASCADE``), so the sweep stays one statement.
- ``search_text``: the casefolded name, description, skill ids, names, descriptions and tags,
  matched as a case-insensitive substring (as the registry always did) through a trigram index:
  ``pg_trgm``'s GIN on PostgreSQL, an FTS5 ``trigram`` table kept by triggers on SQLite.
- ``rev``: a new random value at every write of the row; the card cache's key, so a cached card
  is never stale and needs no invalidation.

Text that decides order is compared byte-wise on both engines (``COLLATE "C"`` on PostgreSQL,
SQLite's default), so both give the same pages.
"""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    Column,
    Float,
    ForeignKey,
    Index,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
)
from sqlalchemy.types import TypeEngine

from node.registry.records import AgentRecord

NAME_KEY_CHARS = 128
"""The casefolded name is cut here in the sort key (index rows stay small)."""
SEPARATOR = "\x1f"
"""Between the fields of ``search_text``; a needle holding it matches nothing."""
SKILL, TAG = "s", "t"


def _bytewise(length: int | None = None) -> TypeEngine[str]:
    plain: TypeEngine[str] = String(length) if length else Text()
    return plain.with_variant(String(length, collation="C"), "postgresql")


metadata = MetaData()
agents = Table(
    "registry_agents",
    metadata,
    Column("id", _bytewise(128), primary_key=True),
    Column("card_url", String(2048), nullable=False, unique=True),
    Column("name", Text, nullable=False),
    Column("description", Text, nullable=False),
    Column("skills", JSON, nullable=False),
    Column("card", JSON, nullable=False),
    Column("registered_at", Float, nullable=False),
    Column("last_seen", Float, nullable=False),
    Column("card_etag", Text),
    Column("rev", String(32)),
    Column("name_key", _bytewise()),
    Column("search_text", Text),
)
terms = Table(
    "registry_terms",
    metadata,
    Column("kind", String(1), nullable=False),
    Column("term", _bytewise(), nullable=False),
    Column("name_key", _bytewise(), nullable=False),
    Column("agent_id", _bytewise(128), ForeignKey(agents.c.id, ondelete="CASCADE"), nullable=False),
    PrimaryKeyConstraint("kind", "term", "name_key", "agent_id"),
)
INDEXES = (
    Index("registry_agents_last_seen", agents.c.last_seen),
    Index("registry_agents_order", agents.c.name_key, agents.c.id),
    Index("registry_terms_agent", terms.c.agent_id),
)
ADDED_COLUMNS = ("card_etag", "rev", "name_key", "search_text")
"""Columns newer than the first schema, added to an older table at start."""

SQLITE_DDL = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS registry_fts USING fts5(search_text, "
    "content='registry_agents', content_rowid='rowid', tokenize='trigram case_sensitive 1')",
    "CREATE TRIGGER IF NOT EXISTS registry_fts_insert AFTER INSERT ON registry_agents "
    "WHEN new.search_text IS NOT NULL BEGIN "
    "INSERT INTO registry_fts(rowid, search_text) VALUES (new.rowid, new.search_text); END",
    "CREATE TRIGGER IF NOT EXISTS registry_fts_delete AFTER DELETE ON registry_agents "
    "WHEN old.search_text IS NOT NULL BEGIN INSERT INTO registry_fts(registry_fts, rowid, "
    "search_text) VALUES ('delete', old.rowid, old.search_text); END",
    "CREATE TRIGGER IF NOT EXISTS registry_fts_update AFTER UPDATE OF search_text "
    "ON registry_agents BEGIN "
    "INSERT INTO registry_fts(registry_fts, rowid, search_text) "
    "SELECT 'delete', old.rowid, old.search_text WHERE old.search_text IS NOT NULL; "
    "INSERT INTO registry_fts(rowid, search_text) "
    "SELECT new.rowid, new.search_text WHERE new.search_text IS NOT NULL; END",
)
"""The FTS5 trigram index of ``search_text`` (an external-content table kept by triggers)."""
PG_TRIGRAM_EXTENSION = "CREATE EXTENSION IF NOT EXISTS pg_trgm"
PG_TRIGRAM_INDEX = (
    "CREATE INDEX IF NOT EXISTS registry_agents_text ON registry_agents "
    "USING gin (search_text gin_trgm_ops)"
)


def name_key(name: str) -> str:
    return name.casefold()[:NAME_KEY_CHARS]


def search_text(record: AgentRecord) -> str:
    parts = [record.name, record.description]
    for s in record.skills:
        parts.extend((s.id, s.name, s.description, *s.tags))
    return SEPARATOR.join(p.replace(SEPARATOR, " ") for p in parts).casefold()


def term_rows(record: AgentRecord) -> list[dict[str, str]]:
    """The ``registry_terms`` rows that find ``record`` by skill id and by tag."""
    found = {(SKILL, s.id) for s in record.skills}
    found.update((TAG, t) for s in record.skills for t in s.tags)
    key = name_key(record.name)
    return [{"kind": k, "term": t, "name_key": key, "agent_id": record.id} for k, t in found]
