"""The SDK fixes of ``node.server.sdk_tuning``: same validation errors, wrappers gone, and a loud
failure when an a2a-sdk upgrade moves or changes what they replace."""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import subprocess
import sys
from importlib.metadata import version
from typing import Any

import pytest
from a2a.server.request_handlers import request_handler
from a2a.types import a2a_pb2
from a2a.utils import proto_utils, telemetry
from a2a.utils.errors import InvalidParamsError
from google.protobuf.json_format import ParseDict
from google.protobuf.message import Message as ProtobufMessage

from node.client import skill_message
from node.server import sdk_tuning
from node.server.sdk_tuning import SDK_VALIDATOR, SUPPORTED, required_field_errors

UPGRADE = (
    "a2a-sdk changed what node/server/sdk_tuning.py replaces: check the module against the new "
    "SDK (is the fix upstream now?), then update SUPPORTED and these fingerprints"
)

#: sha256 (first 16 hex digits) of the source of everything the tuning replaces or relies on.
FINGERPRINTS = {
    (proto_utils, "_validate_proto_required_fields_internal"): "283971acfad14571",
    (proto_utils, "_check_required_field_violation"): "b34a8d242ef12965",
    (proto_utils, "_recurse_validation"): "b191e43fbfdff995",
    (proto_utils, "_append_nested_errors"): "14bb5b6c34bb66ad",
    (proto_utils, "_field_is_repeated"): "e2db5687d4ccac12",
    (proto_utils, "validate_proto_required_fields"): "25567505037a0733",
    (request_handler, "validate_request_params"): "89e12cf5847fc5dd",
    (telemetry, "trace_function"): "544ee3b43f9c074f",
    (telemetry, "trace_class"): "cad99b5627bea284",
}


def test_the_installed_sdk_is_a_version_the_tuning_was_checked_against() -> None:
    assert version("a2a-sdk") in SUPPORTED, UPGRADE


@pytest.mark.parametrize(
    ("module", "name"), list(FINGERPRINTS), ids=lambda v: getattr(v, "__name__", v)
)
def test_what_the_tuning_replaces_is_still_where_and_what_it_was(module: Any, name: str) -> None:
    found = SDK_VALIDATOR if name == "_validate_proto_required_fields_internal" else None
    found = found or getattr(module, name, None)
    assert found is not None, f"{module.__name__}.{name} is gone: {UPGRADE}"
    digest = hashlib.sha256(inspect.getsource(found).encode()).hexdigest()[:16]
    assert digest == FINGERPRINTS[module, name], f"{module.__name__}.{name} changed: {UPGRADE}"


def _samples() -> list[ProtobufMessage]:
    """Every a2a message type empty, plus requests and tasks with errors at every depth."""
    empty = [getattr(a2a_pb2, name)() for name in a2a_pb2.DESCRIPTOR.message_types_by_name]
    good = a2a_pb2.SendMessageRequest(message=skill_message("calculate", {"expression": "1"}))
    shaped = [
        {"message": {"parts": [{"text": "x"}, {}]}},
        {"message": {"messageId": "m", "role": "ROLE_USER", "parts": []}, "metadata": {"a": 1}},
        {"message": {"messageId": "m", "parts": [{"data": {"k": [1, {"z": None}]}}]}},
        {"configuration": {"taskPushNotificationConfig": {"url": ""}}},
    ]
    requests = [ParseDict(s, a2a_pb2.SendMessageRequest()) for s in shaped]
    task = ParseDict(
        {
            "id": "t",
            "status": {"message": {"parts": [{}]}},
            "artifacts": [{"parts": []}, {"artifactId": "a", "parts": [{"text": "y"}]}],
            "history": [{"role": "ROLE_AGENT"}],
        },
        a2a_pb2.Task(),
    )
    card = ParseDict(
        {"name": "n", "securitySchemes": {"k": {"apiKeySecurityScheme": {}}}, "skills": [{}]},
        a2a_pb2.AgentCard(),
    )
    return [*empty, good, *requests, task, card]


@pytest.mark.parametrize("sample", _samples(), ids=lambda m: m.DESCRIPTOR.name)
def test_the_cached_validator_reports_what_the_sdks_does(sample: ProtobufMessage) -> None:
    assert required_field_errors(sample) == SDK_VALIDATOR(sample)


def test_a_node_refuses_an_incomplete_request_with_the_sdks_error() -> None:
    sdk_tuning.apply()
    assert proto_utils._validate_proto_required_fields_internal is required_field_errors
    with pytest.raises(InvalidParamsError) as raised:
        proto_utils.validate_proto_required_fields(a2a_pb2.SendMessageRequest())
    errors = [{"field": "message", "message": "Field is required."}]
    assert raised.value.data == {"errors": errors}


PROBE = """
import a2a.server.request_handlers
import json
import os
from node.server import sdk_tuning
if os.environ.get("PROBE_TRACER_PROVIDER"):
    from opentelemetry import trace

    class Provider(trace.TracerProvider):
        def get_tracer(self, *args, **kwargs):
            return trace.NoOpTracer()

    trace.set_tracer_provider(Provider())
from node.server.sdk_tuning import TRACED_MODULES, _wrapper_codes, unwrap_telemetry
report = sdk_tuning.apply()
codes = _wrapper_codes()
import sys
left = [
    f"{m}.{c}.{a}"
    for m, mod in list(sys.modules.items()) if m.startswith("a2a.") and mod is not None
    for c, cls in vars(mod).items() if isinstance(cls, type)
    for a, v in vars(cls).items() if getattr(v, "__code__", None) in codes
]
print(json.dumps({"report": report, "left": left}))
"""


def _probe(enabled: str, *, provider: bool = False) -> dict[str, Any]:
    env = {**os.environ, "OTEL_INSTRUMENTATION_A2A_SDK_ENABLED": enabled}
    if provider:
        env["PROBE_TRACER_PROVIDER"] = "1"
    out = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def test_with_telemetry_off_no_sdk_method_keeps_its_wrapper() -> None:
    probe = _probe("false")
    assert probe["report"]["validator"] == 1
    assert probe["report"]["encoder"] == 3, UPGRADE  # the three SDK modules that encode answers
    assert probe["report"]["parser"] == 1, UPGRADE  # the JSON-RPC dispatcher parses params
    assert probe["report"]["queues"] == (4 if sys.version_info < (3, 13) else 0), UPGRADE
    # handlers, queues, task manager, dispatchers, transports: ~200 wrapped methods in 1.3.0
    assert probe["report"]["telemetry_unwrapped"] > 100, UPGRADE
    assert probe["left"] == []


def test_with_telemetry_on_and_a_tracer_provider_the_wrappers_stay() -> None:
    assert telemetry.otel_installed  # a dependency (a2a-sdk[telemetry]): never skipped
    probe = _probe("true", provider=True)
    assert probe["report"]["telemetry_unwrapped"] == 0
    assert any("DefaultRequestHandlerV2.on_message_send" in name for name in probe["left"])


def test_with_telemetry_on_but_no_tracer_provider_the_no_op_wrappers_go() -> None:
    probe = _probe("true")
    assert probe["report"]["telemetry_unwrapped"] > 100, UPGRADE
    assert probe["left"] == []
