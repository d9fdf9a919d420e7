"""PeerToolset: the peers' skills as a catalog whose contents the peer directory swaps whole.

Readers (the runner, planners, pipelines, the served card) see one immutable
:class:`~node.tooling.catalog.Toolbox` at a time; :meth:`PeerToolset.replace` installs the next
one and bumps ``revision``. Compiled validators of unchanged tools are reused.
"""

from __future__ import annotations

from node.tooling.catalog import SwappableCatalog

__all__ = ["PeerToolset"]


class PeerToolset(SwappableCatalog):
    """A :class:`~node.tooling.catalog.ToolCatalog` of peer tools, replaced on each refresh."""
