"""The ``a2a-node`` command line: serve nodes and the registry, talk to nodes, inspect cards.

One module per family of commands, each registering its sub-parsers::

    serve.py     serve                     one node from its card
    tasks.py     send, get, cancel         talking to a node about tasks
    watch.py     watch                     a task's live progress and calls (also send --follow)
    top.py       top                       a registry's agents with health and load (/metrics)
    cards.py     card, tools, call         a card and its tools, locally
    network.py   registry, agents, up      the registry and a local network
    mcp.py       mcp-stdio                 a card's skills for an MCP host, over stdio
    output.py    printing: tasks, messages, tables, --json
    common.py    exit codes, the CLI's errors, argument helpers

Known errors (:class:`~node.errors.NodeError`) print one line on stderr and exit 1 or 2 (see
:mod:`node.cli.common`); anything else is a bug and shows its traceback. Nothing imports this
package but its own ``__main__`` and the console script.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence

from node.cli.cards import add_card_commands
from node.cli.common import EXIT_FAILED, exit_code_of
from node.cli.mcp import add_mcp_commands
from node.cli.network import add_network_commands
from node.cli.serve import add_serve_command
from node.cli.tasks import add_task_commands
from node.cli.top import add_top_command
from node.cli.watch import add_watch_command
from node.errors import NodeError

__all__ = ["build_parser", "main", "parse", "run"]

log = logging.getLogger("node.cli")
LOG_LEVELS = ("debug", "info", "warning", "error")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="a2a-node",
        description="Serve A2A nodes and their registry, talk to nodes, inspect cards.",
    )
    parser.add_argument(
        "--log-level",
        default="warning",
        type=str.lower,
        choices=LOG_LEVELS,
        help="how much to log on stderr; debug also shows tracebacks (default: warning)",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_serve_command(sub)
    add_task_commands(sub)
    add_watch_command(sub)
    add_card_commands(sub)
    add_network_commands(sub)
    add_top_command(sub)
    add_mcp_commands(sub)
    return parser


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Parse the command line; ``send``'s TEXT may come after its options.

    argparse gives an optional positional its (empty) value at the first positional chunk, so
    ``send URL --skill shout hello`` would leave ``hello`` unrecognised: such leftover words
    become TEXT for the commands that take free text (``free_text`` in their defaults).
    """
    parser = build_parser()
    args, extras = parser.parse_known_args(argv)
    if extras:
        words = [w for w in extras if not w.startswith("-") or w == "-"]
        if not getattr(args, "free_text", False) or len(words) != len(extras):
            parser.error(f"unrecognized arguments: {' '.join(extras)}")
        if args.text is not None or len(words) > 1:
            parser.error("give TEXT once, as one argument (quote it when it has spaces)")
        args.text = words[0]
    return args


def _restore_stdout_after_broken_pipe() -> None:
    """``a2a-node … | head``: the reader left; send the rest of stdout nowhere, quietly."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


def main(argv: Sequence[str] | None = None) -> int:
    """The ``a2a-node`` console script: parse ``argv`` and run its command."""
    return run(parse(argv))


def run(args: argparse.Namespace) -> int:
    """Run a parsed command: known errors are one line; a bug raises, with its traceback."""
    logging.basicConfig(level=args.log_level.upper(), format="%(levelname)s %(name)s: %(message)s")
    try:
        code: int = args.run(args)
        sys.stdout.flush()  # a closed pipe shows here, inside the try
        return code
    except NodeError as exc:
        log.debug("the error's traceback", exc_info=exc)
        print(f"a2a-node: {exc}", file=sys.stderr)
        return exit_code_of(exc)
    except BrokenPipeError:
        _restore_stdout_after_broken_pipe()
        return EXIT_FAILED
    except KeyboardInterrupt:
        return 130
