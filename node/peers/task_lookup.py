"""Find a peer's task for a call whose answer never came: by the context id the call was sent in.

A blocking ``SendMessage`` names the peer's task only in its answer; when the call is cancelled
(or passes its deadline) while that answer is on its way, the caller does not know what to
cancel. :class:`~node.peers.peer_client.PeerClient` therefore sends every message that has no
``contextId`` with a fresh one of its own (a random UUID: the peer adopts it for the new task, as
the a2a-sdk's ``RequestContext`` and this node's lean path do, and nobody else's task can be in
it), and looks the task up with A2A 1.0's ``ListTasks(contextId=...)``. A message that came with
its caller's context id is matched in that context by its ``messageId`` in the task's history.

The peer may not have stored the task yet (the request is still on its way; a lean-path peer
stores a read-only call only once it has run :data:`~node.server.lean_path.VISIBLE_AFTER_S`, a
quick one only when it ends): an empty answer is asked again, waits doubling, until the caller's
bound (``asyncio.timeout``) ends the search. A task found finished needs nothing.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from a2a.client import Client, ClientCallContext
from a2a.types import ListTasksRequest, Task

from node.protocol import TERMINAL

__all__ = ["SentMessage", "open_tasks"]


@dataclass(slots=True)
class SentMessage:
    """What names a call's task on the peer before the peer does."""

    message_id: str
    context_id: str  # "" when the message went without one (nothing to look up)
    own_context: bool  # the client chose ``context_id``: every task in it is this call's

    def holds(self, task: Task) -> bool:
        """True when ``task`` is the one this message created."""
        if self.own_context:
            return True
        return any(m.message_id == self.message_id for m in task.history)


async def open_tasks(
    client: Client,
    sent: SentMessage,
    context: ClientCallContext,
    *,
    first_wait_s: float = 0.02,
    max_wait_s: float = 0.2,
) -> list[str]:
    """Ids of the unfinished tasks ``sent`` created on the peer, asked until the peer lists one.

    Never returns before the peer lists the call's task (or none is to be looked up): bound it.
    """
    if not sent.context_id:
        return []
    request = ListTasksRequest(context_id=sent.context_id, include_artifacts=False)
    if sent.own_context:
        request.history_length = 0  # any task listed is ours: its history is not read
    wait = first_wait_s
    while True:
        page = await client.list_tasks(request, context=context)
        found = [task for task in page.tasks if sent.holds(task)]
        if found:
            return [task.id for task in found if task.status.state not in TERMINAL]
        await asyncio.sleep(wait)
        wait = min(wait * 2, max_wait_s)
