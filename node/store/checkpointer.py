"""WalCheckpointer: copies a SQLite WAL into the database from its own thread, off the commit path.

SQLite's automatic checkpoint runs inside the commit that crosses ``wal_autocheckpoint`` pages:
the writer copies the WAL into the database and fsyncs it, and every save queued meanwhile waits
(20-50 ms every ~0.3 s under a blocking-send load on this machine's disk: the lean path's p99
tail). Here a thread with its own connection runs ``wal_checkpoint(PASSIVE)`` shortly after
commits: it never blocks the writer or readers, so the copying and the fsyncs happen beside them.
The writer keeps a (much higher) automatic checkpoint as the bound on the WAL's size; when it
fires, the frames are mostly copied already, and a fully copied WAL lets the next commit start
it over from the beginning.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from pathlib import Path

__all__ = ["WRITER_AUTOCHECKPOINT", "WalCheckpointer"]

log = logging.getLogger(__name__)
WRITER_AUTOCHECKPOINT = 10_000
"""Pages (~40 MB) after which the writer checkpoints itself (if the thread falls behind)."""


class WalCheckpointer:
    """Runs a passive checkpoint at most every ``interval_s`` after :meth:`wake`; never raises."""

    def __init__(self, path: Path, interval_s: float = 0.2) -> None:
        self._conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._interval_s = interval_s
        self._wake = threading.Event()
        self._stopped = threading.Event()
        self.runs = 0  # checkpoints run by this thread
        self.backfilled = 0  # frames of the WAL in the database after the last one
        self._thread = threading.Thread(target=self._serve, name="sqlite-checkpoint", daemon=True)
        self._thread.start()

    def wake(self) -> None:
        """Something was committed: checkpoint soon (cheap; called by the writer per commit)."""
        self._wake.set()

    def stop(self) -> None:
        """End the thread (after its checkpoint in progress, if any) and close its connection."""
        self._stopped.set()
        self._wake.set()
        self._thread.join()
        self._conn.close()

    def _serve(self) -> None:
        while True:
            self._wake.wait()
            if self._stopped.is_set():
                return
            self._wake.clear()
            try:
                _, _, self.backfilled = self._conn.execute(
                    "PRAGMA wal_checkpoint(PASSIVE)"
                ).fetchone()
                self.runs += 1
            except sqlite3.Error as exc:  # the writer's own checkpoint still bounds the WAL
                log.warning("background WAL checkpoint failed: %s", exc)
            if self._stopped.wait(self._interval_s):
                return
