r"""The registry's tables, and what each agent row is indexed by for search.

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
- ``words``: the words (``\w+``, casefolded, each once) of the name, description and skills'
  ids, names, descriptions and tags, split here in Python so both engines hold the very same
  words: free text matches when every word of the query begins a word of the agent (a GIN index
  over ``array_to_tsvector`` of them on PostgreSQL, an FTS5 ``unicode61`` table on SQLite).
  Partial names: a query of three characters or more also matches inside ``name_key``, through a
  trigram index (``pg_trgm``'s GIN, an FTS5 ``trigram`` table). On PostgreSQL these indexes are
  on the narrow ``registry_search`` (:mod:`node.registry.search_table`), not on the wide rows.
  On SQLite the FTS5 tables are contentless, each row at an ``ord`` that follows page order up
  to ties (:mod:`node.registry.name_order`, with the narrow ``registry_order`` mapping ``ord`` to
  the row, its ``name_key`` and id), so their matches come in page order and a page stops early.
  These tables and ``registry_search`` hold a row exactly while its ``name_key`` is set; the
  store writes them in the same transactions as the rows (set-based, never a trigger per row).
- ``rev``: a new random value at every write of the row; the card cache's key, so a cached card
  is never stale and needs no invalidation.

Text that decides order is compared byte-wise on both engines (``COLLATE "C"`` on PostgreSQL,
SQLite's default), so both give the same pages.
"""

from __future__ import annotations

import re

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
    Column("words", Text),
)
terms = Table(
    "registry_terms",
    metadata,
    Column("kind", String(1), nullable=False),
    Column("term", _bytewise(), nullable=False),
    Column("name_key", _bytewise(), nullable=False),
    Column("agent_id", _bytewise(128), ForeignKey(agents.c.id, ondelete="CASCADE"), nullable=False),
    PrimaryKeyConstraint("kind", "term", "name_key", "agent_id"),
    sqlite_with_rowid=False,  # one B-tree (the key's), not a table and its key's index
)
INDEXES = (
    Index("registry_agents_order", agents.c.name_key, agents.c.id),
    Index("registry_terms_agent", terms.c.agent_id),
)
ADDED_COLUMNS = ("card_etag", "rev", "name_key", "words")
"""Columns newer than the first schema, added to an older table at start."""

SQLITE_DDL = (
    "DROP TRIGGER IF EXISTS registry_fts_insert",  # an earlier layout, kept by triggers
    "DROP TRIGGER IF EXISTS registry_fts_delete",
    "DROP TRIGGER IF EXISTS registry_fts_update",
    "DROP TABLE IF EXISTS registry_fts",
    # the sweep's (PostgreSQL has none: PG_HOT_DDL)
    "CREATE INDEX IF NOT EXISTS registry_agents_last_seen ON registry_agents (last_seen)",
    # a text search's window reads the next rows from here, not from rows holding their cards
    "CREATE INDEX IF NOT EXISTS registry_agents_window "
    "ON registry_agents (name_key, id, last_seen, words)",
)
"""SQLite's indexes besides the word and name tables (:mod:`node.registry.name_order`)."""
PG_FILLFACTOR = 50
"""Percent of each heap page PostgreSQL fills on insert: the rest holds the next versions of
its rows, so a heartbeat's ``UPDATE`` stays on the page (see :data:`PG_HOT_DDL`)."""
PG_HOT_DDL = (
    "DROP INDEX IF EXISTS registry_agents_last_seen",  # made by earlier versions
    f"ALTER TABLE registry_agents SET (fillfactor = {PG_FILLFACTOR})",
)
"""Heartbeats as HOT updates on PostgreSQL: no index holds ``last_seen`` and pages keep room,
so a flushed heartbeat writes one tuple on its page and no index entry (a non-HOT update would
also insert into every index of the row, the GIN word and trigram indexes included). The sweep
and health counts scan the table instead (one statement still; figures in bench/RESULTS.md).
Run at every start (an older table migrates: its rows move to roomy pages as they beat)."""
PG_WORDS = "array_to_tsvector(string_to_array(words, ' '))"
"""The words as a ``tsvector`` taken verbatim (no parser, no stemming); indexed as written."""
PG_GIN_PENDING = "gin_pending_list_limit = 256"
"""kB of new entries a GIN index keeps unsorted (every search reads them all; 4 MB by default)."""
PG_TRIGRAM_EXTENSION = "CREATE EXTENSION IF NOT EXISTS pg_trgm"
WORD = re.compile(r"\w+")
MAX_WORD_CHARS = 100
"""Longer "words" (hashes, base64) are not indexed."""
_LONG_WORD = re.compile(rf"\w{{{MAX_WORD_CHARS + 1}}}")


def name_key(name: str) -> str:
    return name.casefold()[:NAME_KEY_CHARS]


def words(record: AgentRecord) -> str:
    """The agent's words, each once, separated by spaces (see ``words`` above)."""
    parts = [record.name, record.description]
    for s in record.skills:
        parts.extend((s.id, s.name, s.description, *s.tags))
    return " ".join(dict.fromkeys(query_words(" ".join(parts))))


def query_words(text: str) -> list[str]:
    """The words of ``text`` as they are indexed (casefolded ``\\w+`` runs)."""
    folded = text.casefold()
    found: list[str] = WORD.findall(folded)
    if _LONG_WORD.search(folded) is None:  # the usual text: no word to leave out
        return found
    return [w for w in found if len(w) <= MAX_WORD_CHARS]


def term_rows(record: AgentRecord) -> list[dict[str, str]]:
    """The ``registry_terms`` rows that find ``record`` by skill id and by tag."""
    return [
        {"kind": k, "term": t, "name_key": n, "agent_id": i}
        for k, t, n, i in term_values(record, name_key(record.name))
    ]


def term_values(record: AgentRecord, key: str) -> list[tuple[str, str, str, str]]:
    """:func:`term_rows` as tuples in the table's column order, ``key`` being the name key."""
    found = {(SKILL, s.id) for s in record.skills}
    found.update((TAG, t) for s in record.skills for t in s.tags)
    agent_id = record.id
    return [(k, t, key, agent_id) for k, t in found]
