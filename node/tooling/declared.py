"""Schema-first tools declared as data (a card's ``declared_tools:``): an HTTP call or a command.

    {"name": "weather", "description": "...", "parameters": {...JSON Schema...},
     "http": {"method": "GET", "url": "https://api.example.com/weather/{city}",
              "headers": {"accept": "application/json"}, "max_bytes": 1000000}}
    {"name": "word_count", "description": "...", "parameters": {...},
     "command": ["wc", "-w", "--", "{path}"]}

``{param}`` placeholders take the call's arguments. HTTP: placeholders in the URL are
percent-encoded; the other arguments become the query string (GET, HEAD, DELETE) or the JSON body;
every request goes through ``ctx.url_guard`` and the shared ``ctx.http`` client. Commands: each argv
element is substituted on its own and run without a shell; an element that is a lone placeholder
is dropped when its argument is absent, and before a ``--`` element its value may not start with
``-`` (no option injection). The child gets a minimal environment (no secrets) and runs in the
workspace root when there is one. Policy fields (``read_only``, ``timeout``, ...) are as on
:class:`Tool`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import string
from collections.abc import Mapping
from typing import Any, ClassVar
from urllib.parse import quote, urlencode

from node.errors import ConfigError, InvalidArguments, ToolExecutionError
from node.tooling.context import ToolContext
from node.tooling.isolation import Isolation
from node.tooling.tool import Tool, ToolPolicy

__all__ = ["CommandTool", "HttpTool", "declared_tool"]

# a declared tool states its isolation itself (HTTP: inline, command: process)
_POLICY = frozenset(ToolPolicy.field_names()) - {"isolation"}
_KNOWN = {"name", "description", "parameters", "http", "command"} | _POLICY
_HTTP_KEYS = {"method", "url", "headers", "max_bytes"}
_QUERY_METHODS = {"GET", "HEAD", "DELETE"}
_ENV_KEEP = ("PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR")
_STDERR_TAIL = 500


def _fields(template: str, where: str) -> list[str]:
    """The placeholder names in ``template``; only plain ``{name}`` fields are allowed."""
    names = []
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as exc:
        raise ConfigError(f"{where}: bad template {template!r}: {exc}") from exc
    for _, field, spec, conversion in parsed:
        if field is None:
            continue
        if not field.isidentifier() or spec or conversion:
            raise ConfigError(f"{where}: placeholder {{{field}}} must be a plain {{name}}")
        names.append(field)
    return names


def _as_arg(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    return "" if value is None else json.dumps(value, separators=(",", ":"))


class _Declared(Tool):
    """Common construction from a spec: identity, schema and policy."""

    ISOLATION: ClassVar[Isolation]

    def __init__(self, spec: Mapping[str, Any]) -> None:
        unknown = set(spec) - _KNOWN
        if unknown:
            raise ConfigError(f"declared tool: unknown fields {sorted(unknown)}")
        self.name = str(spec.get("name", ""))
        self.description = str(spec.get("description") or self.name)
        self.parameters = spec.get("parameters") or {"type": "object", "properties": {}}
        values = {key: spec[key] for key in _POLICY if key in spec}
        self.policy = ToolPolicy(isolation=self.ISOLATION, **values)
        self.check()
        properties = self.parameters.get("properties") or {}
        self._defaults = {k: v["default"] for k, v in properties.items() if "default" in v}

    def _check_fields(self, names: list[str]) -> None:
        properties = self.parameters.get("properties") or {}
        for name in names:
            if name not in properties:
                raise ConfigError(f"tool {self.name!r}: placeholder {{{name}}} is not a parameter")

    def _value(self, arguments: Mapping[str, Any], name: str) -> Any:
        if name in arguments:
            return arguments[name]
        if name in self._defaults:
            return self._defaults[name]
        raise InvalidArguments(f"{name} is required")


class HttpTool(_Declared):
    """A declared tool that calls an HTTP endpoint through the URL guard."""

    ISOLATION: ClassVar[Isolation] = (
        "inline"  # awaits I/O on the loop; a timeout cancels the request
    )

    def __init__(self, spec: Mapping[str, Any]) -> None:
        super().__init__(spec)
        http = spec["http"]
        if not isinstance(http, Mapping) or not isinstance(http.get("url"), str):
            raise ConfigError(f"tool {self.name!r}: http needs a 'url'")
        unknown = sorted(set(http) - _HTTP_KEYS)
        if unknown:
            raise ConfigError(f"tool {self.name!r}: unknown http fields {unknown}")
        self.method = str(http.get("method", "GET")).upper()
        self.url = http["url"]
        self.headers = {str(k): str(v) for k, v in (http.get("headers") or {}).items()}
        self.max_bytes = int(http.get("max_bytes", 1_000_000))
        self._url_fields = _fields(self.url, f"tool {self.name!r}")
        self._check_fields(self._url_fields)

    async def execute(self, arguments: dict[str, Any], ctx: ToolContext) -> Any:
        if ctx.url_guard is None or ctx.http is None:
            raise ToolExecutionError(
                f"{self.name} needs outbound HTTP, which this node has not configured"
            )
        values = {f: quote(_as_arg(self._value(arguments, f)), safe="") for f in self._url_fields}
        url = self.url.format_map(values)
        rest = {k: v for k, v in arguments.items() if k not in values}
        body = None
        if self.method in _QUERY_METHODS:
            if rest:
                pairs = {k: [_as_arg(i) for i in v] if isinstance(v, list) else _as_arg(v)
                         for k, v in rest.items()}  # fmt: skip
                url = f"{url}{'&' if '?' in url else '?'}{urlencode(pairs, doseq=True)}"
        else:
            body = rest
        response = await ctx.url_guard.fetch(
            ctx.http, self.method, url, headers=self.headers, json=body,
            timeout=self.policy.timeout, max_bytes=self.max_bytes,
        )  # fmt: skip
        if response.status_code >= 400:
            detail = response.text.strip()[-_STDERR_TAIL:]
            raise ToolExecutionError(
                f"{self.name}: HTTP {response.status_code}: {detail}".rstrip(": ")
            )
        if response.content_type == "application/json" or response.content_type.endswith("+json"):
            return response.json()
        return response.text


class CommandTool(_Declared):
    """A declared tool that runs a fixed program with substituted arguments (never a shell)."""

    ISOLATION: ClassVar[Isolation] = (
        "process"  # its own child process, killed at timeout or cancellation
    )

    def __init__(self, spec: Mapping[str, Any]) -> None:
        super().__init__(spec)
        argv = spec["command"]
        if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
            raise ConfigError(f"tool {self.name!r}: command must be a non-empty list of strings")
        if _fields(argv[0], f"tool {self.name!r}"):
            raise ConfigError(f"tool {self.name!r}: the program itself cannot be a placeholder")
        self.argv = list(argv)
        self._plan = [(a, _fields(a, f"tool {self.name!r}")) for a in argv]
        self._check_fields([name for _, names in self._plan for name in names])

    def command_line(self, arguments: Mapping[str, Any]) -> list[str]:
        """The argv for ``arguments`` (raises :class:`InvalidArguments`)."""
        argv: list[str] = []
        options_end = False
        for element, names in self._plan:
            options_end = options_end or element == "--"
            name = names[0] if len(names) == 1 else ""
            if name and element == "{" + name + "}":
                if name not in arguments and name not in self._defaults:
                    continue
                value = _as_arg(self._value(arguments, name))
                if value.startswith("-") and not options_end:
                    raise InvalidArguments(f"{name} must not start with '-'")
                argv.append(value)
            else:
                values = {n: _as_arg(self._value(arguments, n)) for n in names}
                argv.append(element.format_map(values))
        return argv

    async def execute(self, arguments: dict[str, Any], ctx: ToolContext) -> Any:
        argv = self.command_line(arguments)
        env = {k: os.environ[k] for k in _ENV_KEEP if k in os.environ}
        cwd = getattr(ctx.workspace, "root", None)
        limit = self.policy.max_output * 4  # bytes; enough for max_output characters of UTF-8
        try:
            process = await asyncio.create_subprocess_exec(
                *argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, env=env, cwd=cwd,
            )  # fmt: skip
        except OSError as exc:
            raise ToolExecutionError(
                f"{self.name}: cannot start {argv[0]}: {exc.strerror or exc}"
            ) from exc
        try:
            assert process.stdout is not None
            assert process.stderr is not None
            (out, cut), (err, _) = await asyncio.gather(
                _read_bounded(process.stdout, limit), _read_bounded(process.stderr, limit)
            )
            code = await process.wait()
        finally:
            if process.returncode is None:  # cancelled or timed out: never leave it running
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                await process.wait()
        text = out.decode("utf-8", errors="replace")
        if code != 0:
            tail = err.decode("utf-8", errors="replace").strip()[-_STDERR_TAIL:]
            raise ToolExecutionError(
                f"{self.name}: {argv[0]} exited with status {code}: {tail}".rstrip(": ")
            )
        return f"{text}\n[stdout cut at {limit} bytes]" if cut else text


async def _read_bounded(stream: asyncio.StreamReader, limit: int) -> tuple[bytes, bool]:
    """Up to ``limit`` bytes of ``stream``; the rest is drained (so the child never blocks)."""
    kept = bytearray()
    cut = False
    while chunk := await stream.read(65536):
        room = limit - len(kept)
        kept += chunk[:room]
        cut = cut or len(chunk) > room
    return bytes(kept), cut


def declared_tool(spec: Mapping[str, Any]) -> Tool:
    """Build an :class:`HttpTool` or a :class:`CommandTool` from a spec (``ConfigError`` if bad)."""
    if ("http" in spec) == ("command" in spec):
        name = spec.get("name")
        raise ConfigError(f"declared tool {name!r}: give exactly one of http or command")
    return HttpTool(spec) if "http" in spec else CommandTool(spec)
