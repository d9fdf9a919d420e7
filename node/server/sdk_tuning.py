"""Two fixes to a2a-sdk internals that every request pays for, until they are upstream.

1. The SDK checks the REQUIRED fields of every request by walking the message's descriptor and
   reading each field's options, on every call (~90-140 µs for a SendMessageRequest).
   :func:`required_field_errors` gives the same errors, in the same order, from a plan built
   once per message type, and skips nested types that cannot hold a REQUIRED field (``Struct``,
   ``Value``) — about 2 µs.
2. With the SDK's telemetry off (``OTEL_INSTRUMENTATION_A2A_SDK_ENABLED=false``, without
   OpenTelemetry, or with no tracer provider set when the app is built), ``trace_class`` and
   ``trace_function`` still wrap every handler, queue, dispatcher and transport method in a
   wrapper that opens a no-op span (~200 µs per request). Then :func:`apply` puts the wrapped
   functions back.
3. The SDK's HTTP dispatchers turn every answer into JSON with protobuf's ``MessageToDict``
   (~100-150 µs for a SendMessage answer); :func:`apply` gives them
   :func:`node.server.proto_json.message_to_dict`, the same dict from a plan per field in about
   half the time (``tests/server/test_proto_json.py`` compares both over random messages).
4. Before Python 3.13 the SDK's event queues are thread-safe ``culsans`` queues (for their
   ``shutdown``), several per task; :func:`apply` gives the SDK
   :class:`node.server.shutdown_queue.ShutdownQueue` instead: 3.13's ``asyncio.Queue``, which
   the SDK uses on 3.13.
5. The JSON-RPC dispatcher parses every request's params with protobuf's ``ParseDict`` (the
   largest single cost of a lean call's dispatch); :func:`apply` gives it
   :func:`node.server.proto_json.parse_dict`: the same message from a plan per message type for
   plain input, json_format itself for anything else (so its errors are unchanged).

:func:`apply` is called once by ``build_node_app`` (never at import). It patches only the SDK
version it was written against (:data:`SUPPORTED`); another version is left alone with a warning,
and ``tests/server/test_sdk_tuning.py`` fails until this module is checked against it. The
upstream proposals are in ``docs/upstream-a2a-sdk.md``.
"""

from __future__ import annotations

import importlib
import logging
import sys
from collections.abc import Callable, Iterable
from importlib.metadata import version
from typing import Any, cast

from a2a.utils import proto_utils, telemetry
from google.api.field_behavior_pb2 import FieldBehavior, field_behavior
from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message as ProtobufMessage

log = logging.getLogger(__name__)

#: a2a-sdk versions whose internals this module was checked against.
SUPPORTED = frozenset({"1.3.0"})

#: SDK modules that decorate with ``trace_class`` / ``trace_function``, imported before unwrapping
#: so that no wrapper is left in one imported later.
TRACED_MODULES = (
    "a2a.server.tasks.task_manager",
    "a2a.server.request_handlers.default_request_handler",
    "a2a.server.request_handlers.default_request_handler_v2",
    "a2a.server.events.event_queue",
    "a2a.server.events.event_queue_v2",
    "a2a.server.events.event_consumer",
    "a2a.server.events.in_memory_queue_manager",
    "a2a.server.routes.jsonrpc_dispatcher",
    "a2a.server.routes.rest_dispatcher",
    "a2a.compat.v0_3.rest_handler",
    "a2a.compat.v0_3.rest_transport",
    "a2a.compat.v0_3.jsonrpc_transport",
    "a2a.compat.v0_3.grpc_transport",
    "a2a.client.transports.jsonrpc",
    "a2a.client.transports.grpc",
    "a2a.client.transports.rest",
)

#: SDK modules whose answers are encoded with ``MessageToDict`` (given :func:`message_to_dict`).
ENCODING_MODULES = (
    "a2a.server.routes.jsonrpc_dispatcher",
    "a2a.server.routes.rest_dispatcher",
    "a2a.server.routes.common",
)

#: SDK modules that parse requests with ``ParseDict`` (given :func:`parse_dict`).
PARSING_MODULES = ("a2a.server.routes.jsonrpc_dispatcher",)

#: SDK modules that create their event queues with ``create_async_queue``.
QUEUE_MODULES = (
    "a2a.utils._async_queue_compat",
    "a2a.server.agent_execution.active_task",
    "a2a.server.events.event_queue",
    "a2a.server.events.event_queue_v2",
)

#: The SDK's own validator, kept to compare against (tests) before :func:`apply` replaces it.
SDK_VALIDATOR: Callable[[ProtobufMessage], list[proto_utils.ValidationDetail]] = (
    proto_utils._validate_proto_required_fields_internal
)

_MESSAGE = FieldDescriptor.TYPE_MESSAGE
_SINGLE, _MAP, _LIST = 1, 2, 3

# (name, required, repeated, has_presence, default, nesting: 0 / _SINGLE / _MAP / _LIST)
_Check = tuple[str, bool, bool, bool, Any, int]
_plans: dict[Descriptor, tuple[_Check, ...]] = {}


def _is_required(field: FieldDescriptor) -> bool:
    behaviors = field.GetOptions().Extensions[field_behavior]  # type: ignore[index]
    return FieldBehavior.REQUIRED in behaviors


def _may_hold_required(desc: Descriptor) -> bool:
    """Whether a message of type ``desc`` (or anything nested in it) has a REQUIRED field."""
    seen, todo = {desc}, [desc]
    while todo:
        for field in todo.pop().fields:
            if _is_required(field):
                return True
            nested = field.message_type
            if field.type == _MESSAGE and nested is not None and nested not in seen:
                seen.add(nested)
                todo.append(nested)
    return False


def _plan(desc: Descriptor) -> tuple[_Check, ...]:
    """The fields of ``desc`` that can yield an error, in declaration order (built once)."""
    plan = _plans.get(desc)
    if plan is not None:
        return plan
    checks: list[_Check] = []
    for field in desc.fields:
        required = _is_required(field)
        repeated = proto_utils._field_is_repeated(field)
        nesting = 0
        nested = field.message_type
        if field.type == _MESSAGE and nested is not None and _may_hold_required(nested):
            is_map = nested.GetOptions().map_entry
            nesting = _MAP if repeated and is_map else _LIST if repeated else _SINGLE
        if required or nesting:
            checks.append(
                (field.name, required, repeated, field.has_presence, field.default_value, nesting)
            )
    plan = _plans[desc] = tuple(checks)
    return plan


def required_field_errors(msg: ProtobufMessage) -> list[proto_utils.ValidationDetail]:
    """The SDK's ``_validate_proto_required_fields_internal``, from a per-type plan."""
    errors: list[proto_utils.ValidationDetail] = []
    for name, required, repeated, has_presence, default, nesting in _plan(msg.DESCRIPTOR):
        if required:
            value = getattr(msg, name)
            if repeated:
                missing = not value
                text = "Field must contain at least one element."
            else:
                missing = not msg.HasField(name) if has_presence else value == default
                text = "Field is required."
            if missing:
                errors.append(proto_utils.ValidationDetail(field=name, message=text))
        if nesting == _SINGLE:
            if msg.HasField(name):
                _nest(errors, name, required_field_errors(getattr(msg, name)))
        elif nesting == _MAP:
            for key, item in getattr(msg, name).items():
                if isinstance(item, ProtobufMessage):
                    _nest(errors, f"{name}[{key}]", required_field_errors(item))
        elif nesting == _LIST:
            for index, item in enumerate(getattr(msg, name)):
                _nest(errors, f"{name}[{index}]", required_field_errors(item))
    return errors


def _nest(
    errors: list[proto_utils.ValidationDetail],
    prefix: str,
    nested: list[proto_utils.ValidationDetail],
) -> None:
    for error in nested:
        field = error["field"]
        errors.append(
            proto_utils.ValidationDetail(
                field=f"{prefix}.{field}" if field else prefix, message=error["message"]
            )
        )


# -- telemetry wrappers -----------------------------------------------------------------------


def _wrapper_codes() -> frozenset[object]:
    """The code objects of ``trace_function``'s sync and async wrappers."""

    def sync() -> None: ...

    async def coroutine() -> None: ...

    return frozenset(
        {telemetry.trace_function(sync).__code__, telemetry.trace_function(coroutine).__code__}
    )


def _unwrapped(value: Any, codes: frozenset[object]) -> Any:
    """``value`` without its telemetry wrappers (itself when it has none)."""
    while callable(value) and getattr(value, "__code__", None) in codes:
        value = value.__wrapped__
    return value


def unwrap_telemetry() -> int:
    """Put back every function the SDK's telemetry decorators wrapped; how many were replaced."""
    for name in TRACED_MODULES:
        try:
            importlib.import_module(name)
        except ImportError:  # an optional extra (grpc) not installed: nothing to unwrap there
            continue
    codes = _wrapper_codes()
    replaced = 0
    for name, module in list(sys.modules.items()):
        if not name.startswith("a2a.") or module is None:
            continue
        for attr, value in list(vars(module).items()):
            if isinstance(value, type) and value.__module__.startswith("a2a."):
                replaced += _unwrap_class(value, codes)
            elif (original := _unwrapped(value, codes)) is not value:
                setattr(module, attr, original)
                replaced += 1
    return replaced


def _unwrap_class(cls: type, codes: frozenset[object]) -> int:
    replaced = 0
    for attr, value in list(vars(cls).items()):
        original = _unwrapped(value, codes)
        if original is not value:
            setattr(cls, attr, original)
            replaced += 1
    return replaced


# -- applying ---------------------------------------------------------------------------------

_applied: dict[str, int] = {}


def telemetry_active() -> bool:
    """Whether the SDK's spans go anywhere: its instrumentation on and a tracer provider set.

    OpenTelemetry's API alone (``mcp`` installs it) gives spans that go nowhere, at ~200 µs per
    request; they count as off. Tracing must be configured before the node's app is built.
    """
    if not (telemetry.otel_installed and telemetry.otel_enabled):
        return False
    from opentelemetry import trace  # installed, as checked above

    provider = trace.get_tracer_provider()
    return not isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider)


def telemetry_disabled() -> bool:
    """Whether the SDK's spans would go nowhere in this process (see :func:`telemetry_active`)."""
    return not telemetry_active()


def apply() -> dict[str, int]:
    """Apply the five fixes once (later calls return the first call's report).

    The report: ``{"validator": 1, "telemetry_unwrapped": n, "encoder": m, "queues": q,
    "parser": p}`` (zeros for what was not applied).
    """
    if _applied:
        return _applied
    installed = version("a2a-sdk")
    if installed not in SUPPORTED:
        log.warning("a2a-sdk %s: SDK tuning not applied (checked for %s)", installed, SUPPORTED)
        _applied.update(validator=0, telemetry_unwrapped=0, encoder=0, queues=0, parser=0)
        return _applied
    internal: Callable[..., Any] = required_field_errors
    cast(Any, proto_utils)._validate_proto_required_fields_internal = internal
    unwrapped = unwrap_telemetry() if telemetry_disabled() else 0
    _applied.update(
        validator=1,
        telemetry_unwrapped=unwrapped,
        encoder=use_fast_encoder(),
        queues=use_shutdown_queues(),
        parser=use_fast_parser(),
    )
    return _applied


def use_shutdown_queues() -> int:
    """Give :data:`QUEUE_MODULES` 3.13's queue (before 3.13); how many modules took it."""
    if sys.version_info >= (3, 13):  # the SDK's own choice is asyncio.Queue already
        return 0
    from node.server.shutdown_queue import create_async_queue

    replaced = 0
    for name in QUEUE_MODULES:
        module = importlib.import_module(name)
        if hasattr(module, "create_async_queue"):
            cast(Any, module).create_async_queue = create_async_queue
            replaced += 1
    return replaced


def use_fast_encoder() -> int:
    """Give :data:`ENCODING_MODULES` :func:`message_to_dict`; how many modules took it."""
    from node.server.proto_json import message_to_dict

    return _replace(ENCODING_MODULES, "MessageToDict", json_format.MessageToDict, message_to_dict)


def use_fast_parser() -> int:
    """Give :data:`PARSING_MODULES` :func:`parse_dict`; how many modules took it."""
    from node.server.proto_json import parse_dict

    return _replace(PARSING_MODULES, "ParseDict", json_format.ParseDict, parse_dict)


def _replace(modules: Iterable[str], name: str, original: object, fast: object) -> int:
    """Set ``module.<name>`` to ``fast`` where it is still ``original``; how many were."""
    replaced = 0
    for module_name in modules:
        module = importlib.import_module(module_name)
        if getattr(module, name, None) is original:
            setattr(module, name, fast)
            replaced += 1
    return replaced
