"""Logs that say which task, trace and principal they belong to, as text or JSON, without secrets.

    configure(level="info", fmt="json", secrets=secret_values(card))   # once, by the CLI
    bind(task_id=..., context_id=..., principal=...)                    # by the executor, per task

Every record gets ``task_id``, ``context_id``, ``principal`` (bound to the running task's context:
a contextvar, so each asyncio task sees its own) and ``trace_id`` / ``span_id`` (the current
OpenTelemetry context, :mod:`node.observability.tracing`). The text format appends the fields set
(``[task=… trace=…]``); the JSON format writes one object per line::

    {"time": "2026-12-01T21:00:00.123Z", "level": "INFO", "logger": "node.executor",
     "message": "...", "task_id": "...", "context_id": "...", "trace_id": "...",
     "span_id": "...", "principal": "...", "exception": "Traceback ..."}

No secret reaches the output: the formatted line (message, arguments and traceback alike) has
every registered secret value (the card's keys, tokens, MCP headers and env) replaced by ``***``,
and so does anything shaped like a credential: ``Bearer``/``Basic`` credentials and the values of
``authorization``, ``api-key``, ``token``, ``secret``, ``password`` fields.
"""

from __future__ import annotations

import contextvars
import json
import logging
import re
import sys
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, SecretStr

from node.observability.tracing import current_span_id, current_trace_id

__all__ = ["LogFormat", "bind", "configure", "redact", "secret_values"]

LogFormat = Literal["text", "json"]
FIELDS = ("task_id", "context_id", "trace_id", "span_id", "principal")
MASK = "***"

_bound: contextvars.ContextVar[Mapping[str, str] | None] = contextvars.ContextVar(
    "a2a_node_log_fields", default=None
)
_CREDENTIAL = re.compile(r"(?i)\b(bearer|basic)(\s+)[A-Za-z0-9._~+/=-]+")
_FIELD = re.compile(
    r"(?i)((?:proxy-)?authorization|x-a2a-notification-token|[\w-]*api[_-]?key|[\w-]*token"
    r"|[\w-]*secret|password|passwd|credentials)"
    r"(\\?[\"']?\s*[:=]\s*\\?[\"']?)"
    r"(?!\*\*\*)([^\s\"',;&}\]\\]+)"
)
_secrets: list[str] = []


def bind(**fields: str | None) -> None:
    """Add fields (``task_id``, ``context_id``, ``principal``) to this context's log records."""
    _bound.set({**(_bound.get() or {}), **{k: v for k, v in fields.items() if v}})


def record_fields() -> dict[str, str]:
    """The fields a record made here would carry."""
    fields = dict(_bound.get() or {})
    trace_id = current_trace_id()
    if trace_id is not None:
        fields["trace_id"] = trace_id
        span_id = current_span_id()
        if span_id is not None:
            fields["span_id"] = span_id
    return fields


def redact(text: str) -> str:
    """``text`` without registered secrets or credential-shaped values."""
    for secret in _secrets:
        if secret in text:
            text = text.replace(secret, MASK)
    text = _CREDENTIAL.sub(rf"\1\2{MASK}", text)
    return _FIELD.sub(rf"\1\2{MASK}", text)


def secret_values(model: Any) -> list[str]:
    """Every :class:`~pydantic.SecretStr` value inside ``model`` (a card), longest first."""
    found: set[str] = set()

    def walk(value: Any) -> None:
        if isinstance(value, SecretStr):
            secret = value.get_secret_value()
            if len(secret) >= 4:  # shorter ones would mask ordinary words
                found.add(secret)
        elif isinstance(value, BaseModel):
            for name in type(value).model_fields:
                walk(getattr(value, name))
        elif isinstance(value, Mapping):
            for item in value.values():
                walk(item)
        elif isinstance(value, list | tuple | set | frozenset):
            for item in value:
                walk(item)

    walk(model)
    return sorted(found, key=len, reverse=True)


class _ContextFilter(logging.Filter):
    """Puts the task's and trace's fields on each record (as attributes named in FIELDS)."""

    def filter(self, record: logging.LogRecord) -> bool:
        for name, value in record_fields().items():
            if getattr(record, name, None) is None:
                setattr(record, name, value)
        return True


class TextFormatter(logging.Formatter):
    """``LEVEL logger: message [task=… context=… trace=… principal=…]``, redacted."""

    _SHORT = {"task_id": "task", "context_id": "context", "trace_id": "trace", "principal": "by"}

    def __init__(self) -> None:
        super().__init__("%(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        tags = [
            f"{short}={value}"
            for name, short in self._SHORT.items()
            if (value := getattr(record, name, None))
        ]
        if tags:
            head, newline, rest = line.partition("\n")  # after the message, before a traceback
            line = f"{head} [{' '.join(tags)}]{newline}{rest}"
        return redact(line)


class JsonFormatter(logging.Formatter):
    """One JSON object per record (see the module docstring), redacted."""

    def format(self, record: logging.LogRecord) -> str:
        when = datetime.fromtimestamp(record.created, UTC)
        entry: dict[str, Any] = {
            "time": when.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in FIELDS:
            value = getattr(record, name, None)
            if value:
                entry[name] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            entry["exception"] = record.exc_text
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return redact(json.dumps(entry, ensure_ascii=False, default=str))


def handler(fmt: LogFormat, stream: Any = None) -> logging.Handler:
    """A stream handler (stderr by default) writing ``fmt`` with the context fields, redacted."""
    out = logging.StreamHandler(stream if stream is not None else sys.stderr)
    out.addFilter(_ContextFilter())
    out.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    return out


def configure(level: str, fmt: LogFormat = "text", secrets: Iterable[str] = ()) -> None:
    """Route every log record of the process through one handler of ``fmt`` at ``level``.

    Replaces the root logger's handlers; uvicorn's loggers that have handlers lose them and
    propagate to it, so its lines are formatted (and redacted) like the node's; its access log,
    when off, stays off. ``secrets`` are masked from now on.
    """
    _secrets[:] = sorted({*_secrets, *(s for s in secrets if len(s) >= 4)}, key=len, reverse=True)
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler(fmt))
    root.setLevel(level.upper())
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logger = logging.getLogger(name)
        if logger.handlers:  # uvicorn's own (an access log turned off has none: it stays off)
            for old in list(logger.handlers):
                logger.removeHandler(old)
            logger.propagate = True
