"""Peers: discovery, peer skills as tools, the hop guard, retries and a circuit breaker.

Import from the modules (kept light here so the card model can import ``settings`` cheaply):
``settings`` (card config), ``hops`` (pure guard), ``breaker``, ``peer_client`` (one peer's A2A
calls), ``remote_tool`` (a skill as a Tool), ``directory`` (static + registry peers as tools),
``registration`` (register + heartbeat with the registry).
"""

from __future__ import annotations
