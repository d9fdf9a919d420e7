"""``send``, ``get`` and ``cancel``: talking to a node about tasks.

``send`` follows the task over SSE (or by polling with ``--poll``) until it ends or waits for
input, all within ``--timeout``; ``--follow`` shows it as ``watch`` does (:mod:`node.cli.watch`);
``--task`` replies to an input-required task. An agent may also
answer with a message and no task (the registry's ``find_agents`` does): it is printed as such.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
from a2a.types import Message, Task, TaskState
from a2a.utils.errors import A2AError

from node.cli.common import (
    EXIT_OK,
    CliError,
    RemoteError,
    add_arg_option,
    add_client_options,
    add_json_option,
    parse_kv,
    token_of,
)
from node.cli.output import print_json, print_message, print_task, state_name
from node.cli.watch import progress_display, watch_task
from node.client import (
    NodeClient,
    apply_event,
    data_message,
    skill_message,
    status_text,
    text_message,
)
from node.protocol import INTERRUPTED, TERMINAL

__all__ = ["add_task_commands"]


@contextlib.contextmanager
def talking_to(url: str) -> Iterator[None]:
    """Turn the SDK's and httpx's errors into one line naming the node."""
    try:
        yield
    except A2AError as exc:
        raise RemoteError(f"{url}: {type(exc).__name__}: {exc}") from exc
    except httpx.HTTPError as exc:
        raise RemoteError(f"cannot reach {url}: {type(exc).__name__}: {exc}") from exc


def build_message(args: argparse.Namespace) -> Message:
    """The message ``send`` sends: data (``--data``), a skill call (``--skill``/``--arg``),
    text (optionally for ``--skill``), or a reply's missing arguments (``--task`` + ``--arg``).
    """
    if args.data is not None:
        try:
            data = json.loads(args.data)
        except json.JSONDecodeError as exc:
            raise CliError(f"--data is not valid JSON: {exc.msg}") from exc
        message = data_message(data)
    elif args.skill and (args.arg or not args.text):
        message = skill_message(args.skill, parse_kv(args.arg))
    elif args.arg and args.task:  # a reply: the missing arguments
        message = data_message({"arguments": parse_kv(args.arg)})
    elif args.text:
        message = text_message(args.text, skill=args.skill)
    elif args.arg:
        raise CliError("--arg needs --skill (or --task, to reply to a task waiting for input)")
    else:
        raise CliError("send needs TEXT, --skill with --arg, --data, or --task with a reply")
    if args.task:
        message.task_id = args.task
    if args.context:
        message.context_id = args.context
    return message


@dataclass(slots=True)
class _Followed:
    """What ``send`` has seen so far (kept when the timeout interrupts it)."""

    task: Task = field(default_factory=Task)
    reply: Message | None = None
    last_progress: str = ""


async def _send(args: argparse.Namespace) -> int:
    """Send, then follow the task to its end; the whole exchange is bounded by ``--timeout``."""
    message = build_message(args)
    seen = _Followed()
    quiet = args.json
    timer = asyncio.timeout(args.timeout)
    try:
        async with timer:
            with talking_to(args.url):
                async with NodeClient.connect(
                    args.url,
                    token=token_of(args),
                    api_key=args.api_key,
                    timeout=args.timeout,
                    streaming=not (args.poll or args.no_wait),
                ) as node:
                    if message.task_id and not message.context_id:
                        message.context_id = (await node.get(message.task_id)).context_id
                    await _follow(node, message, seen, args, quiet=quiet)
    except TimeoutError:
        if not timer.expired():
            raise
        state = state_name(seen.task.status.state) if seen.task.id else "not started"
        where = f"task {seen.task.id} is {state}" if seen.task.id else "no task yet"
        hint = (
            f"; see it later with: a2a-node get {args.url} {seen.task.id}" if seen.task.id else ""
        )
        raise RemoteError(f"gave up after {args.timeout:g}s: {where}{hint}") from None
    if seen.reply is not None:
        return print_message(seen.reply, as_json=args.json)
    if args.no_wait:
        if args.json:
            state = state_name(seen.task.status.state)
            print_json({"kind": "task", "id": seen.task.id, "state": state})
        else:
            print(seen.task.id)
        return EXIT_OK
    return print_task(seen.task, as_json=args.json, url=args.url)


async def _follow(
    node: NodeClient, message: Message, seen: _Followed, args: argparse.Namespace, *, quiet: bool
) -> None:
    if args.follow:  # the live display of ``watch``: state, status messages, calls
        with progress_display() as progress:
            async for event in node.events(message):
                if event.HasField("message"):
                    seen.reply = event.message
                    return
                progress.event(event)
                seen.task = progress.task
            if seen.task.id:
                seen.task = await watch_task(node, seen.task.id, progress)
        return

    def show(task: Task) -> None:
        working = task.status.state == TaskState.TASK_STATE_WORKING
        text = status_text(task) or ("working" if working else "")
        if text and text != seen.last_progress and working and not quiet:
            print(f"  … {text}", file=sys.stderr)
            seen.last_progress = text

    immediately = args.poll or args.no_wait
    async for event in node.events(message, return_immediately=immediately):
        if event.HasField("message"):
            seen.reply = event.message
            return
        seen.task = apply_event(seen.task, event)
        show(seen.task)
    if args.no_wait:
        return
    while seen.task.id and seen.task.status.state not in TERMINAL | INTERRUPTED:
        await asyncio.sleep(0.1)
        seen.task = await node.get(seen.task.id)
        show(seen.task)


async def _get(args: argparse.Namespace) -> int:
    with talking_to(args.url):
        async with NodeClient.connect(args.url, token=token_of(args), api_key=args.api_key) as n:
            task = await n.get(args.task_id)
    return print_task(task, as_json=args.json, url=args.url)


async def _cancel(args: argparse.Namespace) -> int:
    with talking_to(args.url):
        async with NodeClient.connect(args.url, token=token_of(args), api_key=args.api_key) as n:
            task = await n.cancel(args.task_id)
    print_task(task, as_json=args.json)
    return EXIT_OK


def add_task_commands(sub: Any) -> None:
    """Register ``send``, ``get`` and ``cancel``."""
    p = sub.add_parser(
        "send",
        help="send a task to a node and show its progress and results",
        description="Send a task to a node and follow it. TEXT may come before or after the "
        "options. Exit codes: 0 completed, 1 not completed, 2 bad arguments, "
        "3 a batch completed with failed calls.",
    )
    p.add_argument("url", help="the node's base URL or its card URL (…/agent-card.json)")
    p.add_argument("text", nargs="?", help="text to send (with --skill: that skill's text input)")
    p.add_argument("--skill", help="the skill to call (its arguments from --arg, or TEXT)")
    add_arg_option(p)
    p.add_argument("--data", help="a JSON data part, e.g. '{\"calls\": [...]}' for a batch")
    p.add_argument("--task", metavar="ID", help="reply to this task (one waiting for input)")
    p.add_argument(
        "--context", metavar="ID", help="the context of the conversation (default: the task's)"
    )
    follow = p.add_mutually_exclusive_group()
    follow.add_argument("--no-wait", action="store_true", help="print the task id and return")
    follow.add_argument("--poll", action="store_true", help="poll for progress instead of SSE")
    follow.add_argument("--stream", action="store_true", help="follow over SSE (the default)")
    follow.add_argument(
        "--follow",
        action="store_true",
        help="follow over SSE with a live display of state, status and the task's calls "
        "(as watch shows them)",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=120.0,
        help="seconds for the whole exchange, streaming or polling (default: 120)",
    )
    add_json_option(p)
    add_client_options(p)
    p.set_defaults(run=lambda a: asyncio.run(_send(a)), free_text=True)

    for name, fn, help_text in (
        ("get", _get, "show a task: its state and results"),
        ("cancel", _cancel, "cancel a task"),
    ):
        p = sub.add_parser(name, help=help_text)
        p.add_argument("url", help="the node's base URL or its card URL")
        p.add_argument("task_id", help="the task's id (as send --no-wait prints it)")
        add_json_option(p)
        add_client_options(p)
        p.set_defaults(run=lambda a, fn=fn: asyncio.run(fn(a)))
