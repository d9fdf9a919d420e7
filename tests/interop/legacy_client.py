"""An a2a-sdk 0.3 client run by the 0.3 virtual environment's python; prints one JSON object.

    python legacy_client.py URL [--transport JSONRPC|HTTP+JSON] [--text T] [--data JSON]
                                [--metadata JSON] [--token TOKEN] [--streaming]

It reads the agent card at URL as a 0.3 client does (``A2ACardResolver``: the 0.3 model, which
needs ``url``), makes a client with ``ClientFactory`` limited to ``--transport``, sends one user
message (a text part and/or a data part, ``message.metadata``), then, when the answer is a task,
reads it again with ``get_task``. Output (stdout, one line)::

    {"card": {"url", "preferredTransport", "protocolVersion"}, "transport": <chosen>,
     "reply": <the last Task or Message, 0.3 JSON>, "got": <the Task from get_task, or null>}

``--token`` is sent as ``Authorization: Bearer``. Any failure prints ``{"error": "<type>: <text>"}``
and exits 1. This file imports only a2a-sdk 0.3 and its dependencies, never a2a-node.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import uuid
from typing import Any

import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types import DataPart, Message, Part, Role, Task, TaskQueryParams, TextPart


def _message(args: argparse.Namespace) -> Message:
    parts: list[Part] = []
    if args.text is not None:
        parts.append(Part(root=TextPart(text=args.text)))
    if args.data is not None:
        parts.append(Part(root=DataPart(data=json.loads(args.data))))
    return Message(
        role=Role.user,
        parts=parts,
        message_id=uuid.uuid4().hex,
        metadata=json.loads(args.metadata) if args.metadata else None,
    )


async def run(args: argparse.Namespace) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {args.token}"} if args.token else {}
    async with httpx.AsyncClient(headers=headers, timeout=30.0) as http:
        card = await A2ACardResolver(http, args.url).get_agent_card()
        config = ClientConfig(
            streaming=args.streaming, httpx_client=http, supported_transports=[args.transport]
        )
        client = ClientFactory(config).create(card)
        reply: Task | Message | None = None
        async for event in client.send_message(_message(args)):
            reply = event if isinstance(event, Message) else event[0]
        got = None
        if isinstance(reply, Task):
            got = await client.get_task(TaskQueryParams(id=reply.id))
        transport = type(client._transport).__name__  # which 0.3 transport the factory chose
        await client.close()
    dump = {"mode": "json", "exclude_none": True, "by_alias": True}
    return {
        "card": {
            "url": card.url,
            "preferredTransport": card.preferred_transport,
            "protocolVersion": card.protocol_version,
        },
        "transport": transport,
        "reply": reply.model_dump(**dump) if reply is not None else None,
        "got": got.model_dump(**dump) if got is not None else None,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url")
    parser.add_argument("--transport", choices=["JSONRPC", "HTTP+JSON"], default="JSONRPC")
    parser.add_argument("--text")
    parser.add_argument("--data", help="a JSON object sent as a data part")
    parser.add_argument("--metadata", help="a JSON object sent as message.metadata")
    parser.add_argument("--token", default="")
    parser.add_argument("--streaming", action="store_true")
    args = parser.parse_args(argv)
    try:
        result = asyncio.run(run(args))
    except Exception as exc:  # reported to the test as data, not a traceback
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}), flush=True)
        sys.exit(1)
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
