"""Argument schemas compiled once: a fastjsonschema validator plus a precomputed casting plan.

:func:`compile_schema` turns a tool's ``parameters`` into an :class:`ArgumentSchema`. Per call,
:meth:`ArgumentSchema.cast` converts safe scalars the schema asks for ("5" → 5, "0.5" → 0.5,
"yes" → True, 5 → "5" for a string) without touching anything else, and
:meth:`ArgumentSchema.validate` raises :class:`InvalidArguments` with a short message that names the
path (``options.depth must be <= 5``). Only local ``$ref`` (``#/...``) are accepted: a schema never
makes the node fetch anything.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any

import fastjsonschema

from node.errors import ConfigError, InvalidArguments

__all__ = ["ArgumentSchema", "compile_schema", "describe_error"]

Caster = Callable[[Any], Any]
_INT = re.compile(r"^[+-]?\d+$")
_FLOAT = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")
_TRUE = frozenset({"true", "yes", "1"})
_FALSE = frozenset({"false", "no", "0"})
_TYPE_NAMES = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "a boolean",
    "array": "an array",
    "object": "an object",
    "null": "null",
}
_JSON_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean"}
_PY_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "null": (type(None),),
}


class ArgumentSchema:
    """A compiled parameters schema: ``cast`` then ``validate`` (both cheap, per call)."""

    __slots__ = ("_plan", "_validator", "schema")

    def __init__(self, schema: Mapping[str, Any]) -> None:
        try:
            plain = json.loads(json.dumps(schema))  # a private, JSON-only copy, made once
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"schema is not JSON-serialisable: {exc}") from exc
        _check_refs(plain)
        self.schema: dict[str, Any] = plain
        self._validator = _compile(json.dumps(plain, sort_keys=True))
        self._plan = _Planner(plain).object(plain, frozenset())

    def cast(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """Return ``arguments`` with safe scalars cast; a new dict only when something changed."""
        plan = self._plan
        return arguments if plan is None else plan(arguments)  # type: ignore[no-any-return]

    def check(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """``cast`` then ``validate`` in one step (the registry's hot path)."""
        plan = self._plan
        if plan is not None:
            arguments = plan(arguments)
        try:
            self._validator(arguments)
        except fastjsonschema.JsonSchemaValueException as exc:
            raise InvalidArguments(describe_error(exc, self.schema)) from None
        return arguments

    def validate(self, arguments: Any) -> None:
        """Raise :class:`InvalidArguments` naming the first offending path."""
        try:
            self._validator(arguments)
        except fastjsonschema.JsonSchemaValueException as exc:
            raise InvalidArguments(describe_error(exc, self.schema)) from None


def compile_schema(schema: Mapping[str, Any]) -> ArgumentSchema:
    """Compile ``schema`` (raises :class:`ConfigError` when it is not a usable JSON Schema)."""
    return ArgumentSchema(schema)


class _NoRemoteRefs(dict[str, Callable[[str], Any]]):
    """fastjsonschema ``handlers`` that refuse every URI scheme (it would fetch otherwise)."""

    def __contains__(self, scheme: object) -> bool:
        return True

    def __getitem__(self, scheme: str) -> Callable[[str], Any]:
        return _refuse_remote


def _refuse_remote(uri: str) -> Any:
    raise fastjsonschema.JsonSchemaDefinitionException(f"remote reference {uri!r} refused")


@lru_cache(maxsize=512)
def _compile(canonical: str) -> Callable[[Any], Any]:
    """Identical schemas (every peer tool's ``{text, data}``) share one compiled validator."""
    try:
        return fastjsonschema.compile(  # type: ignore[no-any-return]
            json.loads(canonical), handlers=_NoRemoteRefs(), use_default=False
        )
    except fastjsonschema.JsonSchemaDefinitionException as exc:
        raise ConfigError(f"invalid JSON Schema: {exc}") from exc


def _check_refs(node: Any) -> None:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if ref is not None and (not isinstance(ref, str) or not ref.startswith("#")):
            raise ConfigError(f"only local $ref ('#/...') are allowed, got {ref!r}")
        for value in node.values():
            _check_refs(value)
    elif isinstance(node, list):
        for value in node:
            _check_refs(value)


# -- error messages -----------------------------------------------------------------------


def _path(name: str) -> str:
    path = name[4:] if name.startswith("data") else name
    return path.lstrip(".") or "arguments"


def _join(path: str, key: str) -> str:
    return key if path == "arguments" else f"{path}.{key}"


def _types(definition: Any) -> str:
    names = definition if isinstance(definition, list) else [definition]
    return " or ".join(_TYPE_NAMES.get(str(n), str(n)) for n in names)


def describe_error(exc: fastjsonschema.JsonSchemaValueException, root: Any = None) -> str:
    """A short, stable message for a validation failure (``options.depth must be <= 5``).

    When an ``anyOf``/``oneOf`` fails and exactly one alternative has the value's JSON type
    (``Optional[Model]`` given an object), the message comes from that alternative, so it still
    names the nested path.
    """
    name = exc.name or "data"
    path, rule, ruled = _path(name), exc.rule, exc.rule_definition
    value, definition = exc.value, exc.definition or {}
    if rule == "required" and isinstance(value, dict):
        missing = [key for key in ruled if key not in value]
        return ", ".join(_join(path, key) for key in missing) + (
            " is required" if len(missing) == 1 else " are required"
        )
    if rule == "additionalProperties" and isinstance(value, dict):
        known = definition.get("properties", {})
        patterns = [re.compile(p) for p in definition.get("patternProperties", {})]
        extra = [k for k in value if k not in known and not any(p.search(k) for p in patterns)]
        what = "unknown argument" if path == "arguments" else f"{path}: unknown property"
        return f"{what} {', '.join(map(repr, extra or ['?']))}"
    if rule in ("anyOf", "oneOf"):
        nested = _nested_error(ruled, value, name, root)
        if nested is not None:
            return nested
    simple = {
        "minimum": f">= {ruled}",
        "maximum": f"<= {ruled}",
        "exclusiveMinimum": f"> {ruled}",
        "exclusiveMaximum": f"< {ruled}",
        "multipleOf": f"a multiple of {ruled}",
        "const": json.dumps(ruled),
        "format": f"a valid {ruled}",
    }
    if rule in simple:
        return f"{path} must be {simple[rule]}"
    messages: dict[str, Callable[[], str]] = {
        "type": lambda: f"must be {_types(ruled)}",
        "enum": lambda: "must be one of " + ", ".join(json.dumps(v) for v in ruled),
        "minLength": lambda: f"must be at least {_count(ruled, 'character')}",
        "maxLength": lambda: f"must be at most {_count(ruled, 'character')}",
        "minItems": lambda: f"must have at least {_count(ruled, 'item')}",
        "maxItems": lambda: f"must have at most {_count(ruled, 'item')}",
        "minProperties": lambda: f"must have at least {_count(ruled, 'property')}",
        "maxProperties": lambda: f"must have at most {_count(ruled, 'property')}",
        "uniqueItems": lambda: "must not contain duplicate items",
        "pattern": lambda: f"must match the pattern {ruled}",
        "anyOf": lambda: _alternatives(ruled, root, "must be"),
        "oneOf": lambda: _alternatives(ruled, root, "must be exactly one of"),
    }
    if rule in messages:
        return f"{path} {messages[rule]()}"
    return str(exc.message).replace(name, path, 1)


def _count(n: Any, noun: str) -> str:
    if n == 1:
        return f"1 {noun}"
    return f"{n} {noun[:-1]}ies" if noun.endswith("y") else f"{n} {noun}s"


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    return {dict: "object", list: "array", str: "string", float: "number"}.get(
        type(value), "integer" if isinstance(value, int) else "?"
    )


def _alternatives(options: Any, root: Any, verb: str) -> str:
    types = _type_set([(o, s) for option in options for o, s in _forms(option, root, frozenset())])
    return f"{verb} {_types(types)}" if types else "does not match any allowed form"


def _nested_error(options: Any, value: Any, name: str, root: Any) -> str | None:
    """The error of the one alternative matching the value's JSON type, if there is one."""
    kind = _json_type(value)
    matching = []
    for option in options if isinstance(options, list) else []:
        types = _type_set(_forms(option, root, frozenset()))
        if kind in types or (kind == "integer" and "number" in types):
            matching.append(option)
    if len(matching) != 1:
        return None
    sub_schema = dict(matching[0])
    if isinstance(root, dict):
        sub_schema.update({k: root[k] for k in ("$defs", "definitions") if k in root})
    try:
        _compile(json.dumps(sub_schema, sort_keys=True))(value)
    except fastjsonschema.JsonSchemaValueException as sub:
        sub.name = name + (sub.name or "data")[4:]
        return describe_error(sub, root)
    except ConfigError:
        return None
    return None


# -- casting plans --------------------------------------------------------------------------


def _resolve(schema: Any, root: dict[str, Any], seen: frozenset[str]) -> tuple[Any, frozenset[str]]:
    """Follow local ``$ref`` chains; ``None`` on a cycle or a dangling reference."""
    while isinstance(schema, dict) and isinstance(schema.get("$ref"), str):
        ref = schema["$ref"]
        if ref in seen:
            return None, seen
        seen = seen | {ref}
        target: Any = root
        for part in ref[2:].split("/") if ref != "#" else []:
            part = part.replace("~1", "/").replace("~0", "~")
            target = target.get(part) if isinstance(target, dict) else None
        schema = target
    return schema, seen


def _forms(
    schema: Any, root: dict[str, Any], seen: frozenset[str]
) -> list[tuple[dict[str, Any], frozenset[str]]]:
    """``schema`` and its ``anyOf``/``oneOf`` alternatives, resolved."""
    schema, seen = _resolve(schema, root, seen)
    if not isinstance(schema, dict):
        return []
    forms = [(schema, seen)]
    for key in ("anyOf", "oneOf"):
        for option in schema.get(key) or []:
            forms += _forms(option, root, seen)
    return forms


def _type_set(forms: list[tuple[dict[str, Any], frozenset[str]]]) -> list[str]:
    found: list[str] = []
    for schema, _ in forms:
        declared = schema.get("type")
        if declared is None and ("enum" in schema or "const" in schema):
            values = schema.get("enum") or [schema.get("const")]
            declared = [_JSON_TYPES.get(type(v), "") for v in values]
        names = [declared] if isinstance(declared, str) else declared or []
        found += [t for t in names if isinstance(t, str) and t and t not in found]
    return found


def _to_int(value: Any) -> Any:
    if isinstance(value, str) and _INT.match(value.strip()):
        return int(value)
    if type(value) is float and value.is_integer():
        return int(value)
    return value


def _to_number(value: Any) -> Any:
    if isinstance(value, str) and _FLOAT.match(value.strip()):
        text = value.strip()
        number = int(text) if _INT.match(text) else float(text)
        return number if math.isfinite(number) else value
    return value


def _to_bool(value: Any) -> Any:
    if isinstance(value, str):
        lowered = value.strip().lower()
        if lowered in _TRUE:
            return True
        if lowered in _FALSE:
            return False
    return value


def _to_str(value: Any) -> Any:
    return str(value) if type(value) in (int, float) else value


_SCALAR_CASTS: tuple[tuple[str, Caster], ...] = (
    ("integer", _to_int),
    ("number", _to_number),
    ("boolean", _to_bool),
    ("string", _to_str),
)


Plan = tuple[tuple[type, ...], Caster]  # (types that need no cast, caster)


class _Planner:
    """Builds casting plans for one schema; each ``$ref`` target is planned once (recursion ok)."""

    def __init__(self, root: dict[str, Any]) -> None:
        self.root = root
        self.refs: dict[str, Plan | None] = {}
        self.building: set[str] = set()

    def value(self, schema: Any, seen: frozenset[str]) -> Plan | None:
        """How to cast one value, or ``None`` when the schema asks for nothing castable."""
        ref = schema.get("$ref") if isinstance(schema, dict) else None
        if isinstance(ref, str):
            if ref in self.refs:
                return self.refs[ref]
            if ref in self.building:  # a recursive schema: look the plan up when it runs
                return (), lambda value: _apply(self.refs.get(ref), value)
            self.building.add(ref)
            self.refs[ref] = plan = self._value(schema, seen)
            self.building.discard(ref)
            return plan
        return self._value(schema, seen)

    def _value(self, schema: Any, seen: frozenset[str]) -> Plan | None:
        forms = _forms(schema, self.root, seen)
        for form, form_seen in forms:
            nested = self.object(form, form_seen)
            if nested is not None:
                return (), nested
        for form, form_seen in forms:
            item = self.value(form["items"], form_seen) if "items" in form else None
            if item is not None:
                return (), _list_caster(*item)
        types = _type_set(forms)
        accepted = tuple(t for name in types for t in _PY_TYPES.get(name, ()))
        casts = [cast for name, cast in _SCALAR_CASTS if name in types]
        if "string" in types:  # a string is already valid: only non-strings may become strings
            casts = [_to_str]
        if not casts:
            return None

        def cast_scalar(value: Any) -> Any:
            if type(value) is bool or isinstance(value, accepted):  # never bool → int or string
                return value
            for cast in casts:
                new = cast(value)
                if new is not value:
                    return new
            return value

        return accepted, cast_scalar

    def object(self, schema: dict[str, Any], seen: frozenset[str]) -> Caster | None:
        properties = schema.get("properties")
        if not isinstance(properties, dict):
            return None
        plan: dict[str, Plan] = {}
        for key, sub in properties.items():
            entry = self.value(sub, seen)
            if entry is not None:
                plan[key] = entry
        return _object_caster(plan) if plan else None


def _apply(plan: Plan | None, value: Any) -> Any:
    return value if plan is None or type(value) in plan[0] else plan[1](value)


def _list_caster(fast: tuple[type, ...], item: Caster) -> Caster:
    def cast_list(values: Any) -> Any:
        if type(values) is not list:
            return values
        out = values
        for index, value in enumerate(values):
            if type(value) in fast:
                continue
            new = item(value)
            if new is not value:
                if out is values:
                    out = list(values)
                out[index] = new
        return out

    return cast_list


def _object_caster(plan: dict[str, Plan]) -> Caster:
    def cast_object(arguments: Any) -> Any:
        if type(arguments) is not dict:
            return arguments
        out = arguments
        for key, value in arguments.items():
            entry = plan.get(key)
            if entry is None or type(value) in entry[0]:
                continue
            new = entry[1](value)
            if new is not value:
                if out is arguments:
                    out = dict(arguments)
                out[key] = new
        return out

    return cast_object
