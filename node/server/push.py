"""A node's push notifications: the config store, the URL check and the background dispatcher.

    push = build_push(card, task_store)       # None when the card turns push off
    handler = NodeRequestHandler(..., **push.handler_kwargs())
    await push.open(stack)                     # in the lifespan, before the handler's aclose

Configs are stored beside the tasks (:func:`node.store.push_configs.open_push_store`). A webhook
URL is checked by the node's SSRF guard, with the card's ``network.allow_cidrs`` (the policy of
``http_fetch``), when a config is created (SendMessage's ``taskPushNotificationConfig`` or
CreateTaskPushNotificationConfig: refused with -32602 and the reason) and again at every delivery.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from typing import Any

from a2a.utils.errors import InvalidParamsError

from node.card import NodeCard
from node.errors import GuardError
from node.server.push_dispatcher import PushDispatcher
from node.store.lifecycle import NodeTaskStore
from node.store.push_configs import PushConfigStore, open_push_store
from node.tooling.guards.urls import UrlGuard

CHECK_TIMEOUT_S = 5.0


@dataclass(slots=True)
class NodePush:
    """What push needs while the node runs."""

    configs: PushConfigStore
    guard: UrlGuard
    dispatcher: PushDispatcher

    async def check_url(self, url: str) -> bool:
        """The SDK handler's push-URL validator: ``True``, or -32602 saying why not."""
        try:
            async with asyncio.timeout(CHECK_TIMEOUT_S):  # name resolution has no bound of its own
                await self.guard.check(url)
        except GuardError as exc:
            raise InvalidParamsError(f"push notification URL refused: {exc}") from exc
        except TimeoutError as exc:
            raise InvalidParamsError(
                "push notification URL refused: its host did not resolve within "
                f"{CHECK_TIMEOUT_S:g} s"
            ) from exc
        return True

    def handler_kwargs(self) -> dict[str, Any]:
        """The ``DefaultRequestHandler`` arguments that turn push on."""
        return {
            "push_config_store": self.configs,
            "push_sender": self.dispatcher,
            "push_url_validator": self.check_url,
        }

    async def open(self, stack: contextlib.AsyncExitStack) -> None:
        """Open the config store and the dispatcher; ``stack`` closes the dispatcher first."""
        await self.configs.initialize()
        stack.push_async_callback(self.configs.close)
        await self.dispatcher.open()
        stack.push_async_callback(self.dispatcher.aclose)


def build_push(card: NodeCard, task_store: NodeTaskStore) -> NodePush | None:
    """The node's push notifications, or ``None`` when ``push.enabled`` is false."""
    if not card.push.enabled:
        return None
    configs = open_push_store(task_store)
    guard = UrlGuard(allow_cidrs=card.network.allow_cidrs, max_redirects=0)
    return NodePush(configs, guard, PushDispatcher(configs, guard, card.push))
