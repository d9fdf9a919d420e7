"""Log records carry their task, trace and principal, as text or JSON, and never a secret."""

from __future__ import annotations

import contextvars
import io
import json
import logging
from pathlib import Path

import uvicorn
from opentelemetry import context as otel_context
from opentelemetry import propagate

from node.card import parse_card
from node.cli import parse
from node.network.launcher import Network
from node.network.spec import load_spec
from node.observability import logs

ROOT = Path(__file__).resolve().parents[2]

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACEPARENT = f"00-{TRACE_ID}-00f067aa0ba902b7-01"


def emit(fmt: logs.LogFormat, message: str, *args: object, exc: bool = False) -> str:
    """What one record logged through a handler of ``fmt`` writes."""
    out = io.StringIO()
    logger = logging.getLogger(f"test.logs.{fmt}")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    handler = logs.handler(fmt, out)
    logger.addHandler(handler)
    try:
        if exc:
            try:
                raise RuntimeError(message % args)
            except RuntimeError:
                logger.exception(message, *args)
        else:
            logger.info(message, *args)
    finally:
        logger.removeHandler(handler)
    return out.getvalue()


def in_task(fn: object) -> str:
    """Run ``fn`` in a fresh context bound to a task, a principal and an incoming trace."""

    def run() -> str:
        logs.bind(task_id="t-1", context_id="c-1", principal="alice")
        otel_context.attach(propagate.extract({"traceparent": TRACEPARENT}))
        assert callable(fn)
        result: str = fn()
        return result

    return contextvars.copy_context().run(run)


def test_a_json_line_carries_the_task_context_trace_and_principal() -> None:
    line = json.loads(in_task(lambda: emit("json", "task %s ran", "t-1")))
    assert line["message"] == "task t-1 ran"
    assert line["level"] == "INFO" and line["logger"] == "test.logs.json"
    assert line["task_id"] == "t-1" and line["context_id"] == "c-1"
    assert line["principal"] == "alice"
    assert line["trace_id"] == TRACE_ID
    assert line["time"].endswith("Z")


def test_a_text_line_appends_the_fields_that_are_set() -> None:
    line = in_task(lambda: emit("text", "hello"))
    assert line.startswith("INFO test.logs.text: hello [task=t-1 context=c-1 trace=")
    assert f"trace={TRACE_ID}" in line and "by=alice" in line
    assert emit("text", "plain") == "INFO test.logs.text: plain\n"  # nothing bound here


def test_a_record_outside_any_task_has_no_fields() -> None:
    line = json.loads(emit("json", "startup"))
    assert not {"task_id", "context_id", "trace_id", "principal"} & set(line)


def test_credentials_are_masked_in_messages_and_tracebacks() -> None:
    leaks = [
        ("headers %s", {"authorization": "Bearer s3cr3t-b34r3r", "x-api-key": "k3y-v4lu3-99"}),
        ("sent Authorization: Basic dXNlcjpwYXNzd29yZA== to %s", "peer"),
        ("config %s", '{"token": "n0tif-t0ken", "password": "hunter2hunter2"}'),
        ("url %s", "https://h/p?api_key=qu3ry-k3y&x=1"),
    ]
    secrets = [
        "s3cr3t-b34r3r",
        "k3y-v4lu3-99",
        "dXNlcjpwYXNzd29yZA",
        "n0tif-t0ken",
        "hunter2hunter2",
    ]
    secrets.append("qu3ry-k3y")
    for fmt in ("text", "json"):
        for message, arg in leaks:
            for exc in (False, True):
                written = emit(fmt, message, arg, exc=exc)  # type: ignore[arg-type]
                assert not [s for s in secrets if s in written], written
                assert logs.MASK in written


def test_registered_secrets_are_masked_wherever_they_appear() -> None:
    card = parse_card(
        {
            "id": "n",
            "name": "N",
            "description": "d",
            "auth": {
                "bearer_tokens": [{"secret": "${B}", "principal": "p"}],
                "api_keys": [{"secret": "${K}", "principal": "q"}],
            },
        },
        env={"B": "plainword-token-1", "K": "another-key-22"},
    )
    assert logs.secret_values(card) == ["plainword-token-1", "another-key-22"]
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    logs.configure("warning", "text", logs.secret_values(card))
    try:
        written = emit("json", "odd %s and %s", "plainword-token-1", "another-key-22")
        assert "plainword-token-1" not in written and "another-key-22" not in written
    finally:
        logs._secrets.clear()
        root.handlers[:] = handlers
        root.setLevel(level)


def test_ordinary_text_is_left_alone() -> None:
    text = "task 1 completed: 3 tokens, keywords=web,text; the token bucket is full"
    assert logs.redact(text) == text


def test_serve_and_up_take_a_log_format_and_up_hands_it_to_every_node(tmp_path: Path) -> None:
    assert parse(["serve", "cards/data.yaml", "--log-format", "json"]).log_format == "json"
    assert parse(["serve", "cards/data.yaml"]).log_format is None  # then the card's
    assert parse(["up", "--log-format", "json"]).log_format == "json"
    spec = ROOT / "deploy" / "local.yaml"
    network = Network(load_spec(spec), spec_dir=spec.parent, run_dir=tmp_path, log_format="json")
    for node in network.nodes:
        argv = node.child.argv
        assert argv[argv.index("--log-format") + 1] == "json"
    plain = Network(load_spec(spec), spec_dir=spec.parent, run_dir=tmp_path)
    assert all("--log-format" not in node.child.argv for node in plain.nodes)


def test_uvicorn_lines_go_through_the_node_handler_and_its_access_log_stays_off() -> None:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    uvicorn.Config(app=lambda: None, log_level="info", access_log=False)  # as make_server does
    logs.configure("info", "json")
    try:
        assert not logging.getLogger("uvicorn").handlers
        assert logging.getLogger("uvicorn.error").hasHandlers()  # the root's, ours
        assert not logging.getLogger("uvicorn.access").hasHandlers()  # uvicorn then logs none
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
