"""``a2a-node registry import FILE``: register many card URLs through ``POST /v1/agents:import``.

The file holds one card URL per line (``-``: standard input); blank lines and ``#`` comments are
skipped. Lines go to the registry in batches (``--batch``, at most the registry's
``import_max_urls``), ``--concurrency`` batches at a time; the registry fetches and checks every
card itself. A batch answered 429/503 is sent again after its ``Retry-After`` (a few times); one
that still fails, or cannot reach the registry, turns into an error for each of its lines, and
the other batches go on. Each line that failed is reported as ``FILE:LINE: URL: code: message``
on standard error. Exit 0 when every line is registered or unchanged, 3 when some failed.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from itertools import islice
from typing import IO, Any

import httpx

from node.cli.common import EXIT_OK, EXIT_PARTIAL, CliError, add_json_option
from node.cli.output import print_json

DEFAULT_BATCH = 1000
RETRIES = 4
TOKEN_ENV_DEFAULT = "A2A_NODE_REGISTRY_TOKEN"


@dataclass(slots=True)
class Summary:
    """What an import did; ``failed`` holds ``(line, url, code, message)`` per failed line."""

    registered: int = 0
    unchanged: int = 0
    failed: list[tuple[int, str, str, str]] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def total(self) -> int:
        return self.registered + self.unchanged + len(self.failed)


def card_lines(stream: IO[str]) -> Iterator[tuple[int, str]]:
    """``(line number, URL)`` for every line that is not blank or a ``#`` comment."""
    for number, line in enumerate(stream, 1):
        text = line.strip()
        if text and not text.startswith("#"):
            yield number, text


async def import_cards(
    registry_url: str,
    lines: Iterable[tuple[int, str]],
    *,
    token: str | None = None,
    batch: int = DEFAULT_BATCH,
    concurrency: int = 4,
    timeout_s: float = 120.0,
    on_error: Callable[[int, str, str, str], None] | None = None,
) -> Summary:
    """Send ``lines`` to the registry's import endpoint; never raises for a bad line or batch."""
    summary = Summary()
    todo = iter(lines)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    start = time.perf_counter()

    def failed(number: int, url: str, code: str, message: str) -> None:
        summary.failed.append((number, url, code, message))
        if on_error is not None:
            on_error(number, url, code, message)

    async with httpx.AsyncClient(
        base_url=registry_url.rstrip("/"), headers=headers, timeout=timeout_s
    ) as http:

        async def send(chunk: list[tuple[int, str]]) -> None:
            try:
                answer = await _post(http, [url for _, url in chunk])
            except _BatchFailed as exc:
                for number, url in chunk:
                    failed(number, url, exc.code, exc.message)
                return
            for (number, url), result in zip(chunk, answer["results"], strict=True):
                if result["status"] == "registered":
                    summary.registered += 1
                elif result["status"] == "unchanged":
                    summary.unchanged += 1
                else:
                    error = result.get("error") or {}
                    failed(number, url, str(error.get("code")), str(error.get("message")))

        async def worker() -> None:
            while chunk := list(islice(todo, batch)):
                await send(chunk)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    summary.seconds = time.perf_counter() - start
    return summary


class _BatchFailed(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


async def _post(http: httpx.AsyncClient, urls: list[str]) -> dict[str, Any]:
    for attempt in range(RETRIES + 1):
        try:
            response = await http.post("/v1/agents:import", json={"card_urls": urls})
        except httpx.HTTPError as exc:
            raise _BatchFailed("registry_unreachable", f"{type(exc).__name__}: {exc}") from exc
        if response.status_code in (429, 503) and attempt < RETRIES:
            retry_after = response.headers.get("retry-after", "1")
            await asyncio.sleep(min(float(retry_after) if retry_after.isdigit() else 1.0, 30))
            continue
        try:
            body = response.json()
        except ValueError:
            body = {}
        if response.status_code != 200 or len(body.get("results", ())) != len(urls):
            error = body.get("error") if isinstance(body, dict) else None
            code = str(error.get("code")) if isinstance(error, dict) else "http_error"
            message = str(error.get("message")) if isinstance(error, dict) else response.text[:300]
            raise _BatchFailed(
                code, f"the registry answered HTTP {response.status_code}: {message}"
            )
        return dict(body)
    raise AssertionError("unreachable")


def cmd_import(args: argparse.Namespace) -> int:
    token = os.environ.get(args.token_env, "").strip() or None
    if args.batch < 1 or args.concurrency < 1:
        raise CliError("--batch and --concurrency must be at least 1")
    name = "<stdin>" if args.file == "-" else args.file
    try:
        stream: IO[str] = sys.stdin if args.file == "-" else open(args.file, encoding="utf-8")  # noqa: SIM115
    except OSError as exc:
        raise CliError(f"cannot read {args.file}: {exc.strerror}") from exc

    def report(number: int, url: str, code: str, message: str) -> None:
        if not args.json:
            print(f"{name}:{number}: {url[:300]}: {code}: {message}", file=sys.stderr)

    with stream:
        summary = asyncio.run(
            import_cards(
                args.registry,
                card_lines(stream),
                token=token,
                batch=args.batch,
                concurrency=args.concurrency,
                on_error=report,
            )
        )
    rate = summary.total / summary.seconds if summary.seconds else 0.0
    if args.json:
        print_json(
            {
                "registered": summary.registered,
                "unchanged": summary.unchanged,
                "errors": [
                    {"line": n, "card_url": u, "code": c, "message": m}
                    for n, u, c, m in summary.failed
                ],
                "seconds": round(summary.seconds, 3),
            }
        )
    else:
        print(
            f"{summary.total} card URLs: {summary.registered} registered, {summary.unchanged} "
            f"unchanged, {len(summary.failed)} failed ({summary.seconds:.1f} s, {rate:.0f}/s)"
        )
    return EXIT_PARTIAL if summary.failed else EXIT_OK


def add_import_command(registry_parser: argparse.ArgumentParser) -> None:
    """``a2a-node registry import FILE`` (``a2a-node registry`` alone still serves)."""
    sub = registry_parser.add_subparsers(dest="registry_command", metavar="{import}")
    p = sub.add_parser("import", help="register the card URLs of FILE (one per line, - for stdin)")
    p.add_argument("file", metavar="FILE", help="card URLs, one per line; - reads standard input")
    p.add_argument("--registry", required=True, metavar="URL", help="the registry's base URL")
    p.add_argument(
        "--token-env",
        default=TOKEN_ENV_DEFAULT,
        metavar="NAME",
        help="environment variable with the registry's write token (default: %(default)s)",
    )
    p.add_argument(
        "--batch", type=int, default=DEFAULT_BATCH, help="URLs per request (default: %(default)s)"
    )
    p.add_argument(
        "--concurrency", type=int, default=4, help="requests at a time (default: %(default)s)"
    )
    add_json_option(p)
    p.set_defaults(run=cmd_import)
