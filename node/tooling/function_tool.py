"""Tools from plain typed functions: the schema comes from the signature and the docstring.

    @tool(read_only=True)
    async def add(a: int, b: int = 0) -> int:
        \"\"\"Add two integers.

        Args:
            a: The first term.
            b: The second term.
        \"\"\"
        return a + b

The JSON Schema is built once, with pydantic, when the tool is defined. A parameter annotated
:class:`ToolContext` receives the call's context and is left out of the schema.

Where the function runs is its ``isolation`` (:mod:`node.tooling.isolation`). Async functions run
on the event loop (``inline``). Sync functions run in a worker thread by default (``thread``);
``isolation="inline"`` (or the older ``inline=True``) runs them on the loop, a promise that they
are bounded to microseconds; ``isolation="process"`` runs them in a killable worker process, for
CPU-bound or untrusted work: the function must then be defined at module level and cannot take a
:class:`ToolContext`.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import re
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, Literal, overload

import annotated_types
import pydantic
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter
from pydantic.fields import FieldInfo

from node.errors import ConfigError, InvalidArguments
from node.tooling.context import ToolContext
from node.tooling.isolation import (
    ISOLATION_MODES,
    default_pool,
    function_reference,
    preload,
)
from node.tooling.tool import Tool, ToolPolicy

__all__ = ["FunctionTool", "parse_docstring", "tool"]

AnyFunction = Callable[..., Any]
_SECTION = re.compile(
    r"^(Args|Arguments|Parameters|Params|Keyword Args|Returns|Return|Yields|Raises|Examples?|"
    r"Notes?|Warnings?|See Also|Attributes|Todo):\s*$"
)
_ARGS_SECTIONS = {"Args", "Arguments", "Parameters", "Params", "Keyword Args"}
_ARG_LINE = re.compile(r"^\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_PLAIN = (str, int, float, bool, type(None), Any, object)
# JSON Schema keywords whose values are schemas, maps of schemas, or lists of schemas
_SUB_SCHEMA = {"items", "additionalProperties", "not", "contains", "propertyNames"}
_SUB_SCHEMA |= {"if", "then", "else", "unevaluatedProperties", "unevaluatedItems"}
_SCHEMA_MAPS = {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"}
_SCHEMA_LISTS = {"anyOf", "oneOf", "allOf", "prefixItems"}


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Split a Google-style docstring into (description, {parameter: description})."""
    lines = inspect.cleandoc(doc or "").splitlines()
    description: list[str] = []
    params: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    params_indent = 0
    for line in lines:
        header = _SECTION.match(line)
        if header:
            section, current = header.group(1), None
            continue
        if section is None:
            description.append(line)
        elif section in _ARGS_SECTIONS and line.strip():
            match = _ARG_LINE.match(line.strip())
            indent = len(line) - len(line.lstrip())
            if match and (current is None or indent <= params_indent):
                current, params_indent = match.group(1), indent
                params[current] = match.group(2).strip()
            elif current is not None:
                params[current] = f"{params[current]} {line.strip()}".strip()
    return "\n".join(description).strip(), params


def strip_titles(schema: Any) -> Any:
    """Return ``schema`` without pydantic's ``title`` keywords (property names are kept)."""
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "title":
            continue
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            value = {name: strip_titles(sub) for name, sub in value.items()}
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            value = [strip_titles(sub) for sub in value]
        elif key in _SUB_SCHEMA:
            value = strip_titles(value)
        out[key] = value
    return out


def _is_plain(annotation: Any) -> bool:
    """True when a validated JSON value already has the Python type the function expects."""
    if annotation in _PLAIN or annotation is inspect.Parameter.empty:
        return True
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        extras = args[1:]
        return _is_plain(args[0]) and all(
            isinstance(m, FieldInfo | annotated_types.BaseMetadata) for m in extras
        )
    if origin is Literal:
        return all(type(a) in (str, int, float, bool, type(None)) for a in args)
    if origin in (list, typing.Union, types.UnionType):
        return all(_is_plain(a) for a in args)
    if origin is dict:
        return args[:1] in ((), (str,)) and all(_is_plain(a) for a in args[1:])
    return annotation in (list, dict)


class FunctionTool(Tool):
    """A :class:`Tool` wrapping a typed function (sync or async)."""

    def __init__(
        self,
        function: AnyFunction,
        *,
        name: str | None = None,
        description: str | None = None,
        inline: bool = False,
        **policy: Any,
    ) -> None:
        """``policy`` takes the fields of :class:`ToolPolicy` (``read_only=True``, ...).

        ``isolation`` defaults to ``inline`` for async functions (and with ``inline=True``),
        ``thread`` for sync ones.
        """
        self.function = function
        self.name = name or str(getattr(function, "__name__", type(function).__name__))
        call = getattr(function, "__call__", None)  # noqa: B004 - async callable objects too
        self._is_async = inspect.iscoroutinefunction(function) or (
            not inspect.isroutine(function) and inspect.iscoroutinefunction(call)
        )
        isolation = policy.pop("isolation", None)
        if inline and isolation not in (None, "inline"):
            raise ConfigError(
                f"tool {self.name!r}: inline=True contradicts isolation={isolation!r}"
            )
        isolation = isolation or ("inline" if inline or self._is_async else "thread")
        self.policy = ToolPolicy.build(f"tool {self.name!r}", isolation=isolation, **policy)
        documented = function.func if isinstance(function, functools.partial) else function
        summary, param_docs = parse_docstring(documented.__doc__)
        self.description = description or summary or self.name
        self.parameters, self._context_param, self._converters = self._build(param_docs)
        self.__doc__ = documented.__doc__
        self.__wrapped__ = function
        self._check_isolation()

    @property
    def inline(self) -> bool:
        """True when the function runs on the event loop (``isolation == "inline"``)."""
        return self.policy.isolation == "inline"

    def check(self) -> None:
        super().check()
        self._check_isolation()

    def _check_isolation(self) -> None:
        isolation = self.policy.isolation
        if isolation not in ISOLATION_MODES:
            return  # Tool.check names the valid modes
        if self._is_async and isolation != "inline":
            raise ConfigError(
                f"tool {self.name!r}: an async function runs on the event loop (isolation "
                f"'inline'), not {isolation!r}; make it sync to run it elsewhere"
            )
        if isolation == "process":
            if self._context_param is not None:
                raise ConfigError(
                    f"tool {self.name!r}: a process-isolated function cannot take a ToolContext"
                )
            try:
                module, _ = function_reference(self.function)
            except ConfigError as exc:
                raise ConfigError(f"tool {self.name!r}: {exc}") from exc
            preload(module)

    @classmethod
    def from_function(cls, function: AnyFunction, **policy: Any) -> FunctionTool:
        """Wrap ``function``; ``policy`` takes the keyword arguments of ``__init__``."""
        return cls(function, **policy)

    def _build(
        self, param_docs: Mapping[str, str]
    ) -> tuple[dict[str, Any], str | None, dict[str, TypeAdapter[Any]]]:
        try:
            target = self.function
            if isinstance(target, functools.partial):
                target = target.func
            elif not inspect.isroutine(target):
                target = type(target).__call__  # a callable object
            hints = typing.get_type_hints(
                target, localns={"ToolContext": ToolContext}, include_extras=True
            )
        except Exception as exc:
            raise ConfigError(f"tool {self.name!r}: cannot resolve type hints: {exc}") from exc
        fields: dict[str, Any] = {}
        context_param: str | None = None
        converters: dict[str, TypeAdapter[Any]] = {}
        extra: Literal["allow", "forbid"] = "forbid"
        for index, param in enumerate(inspect.signature(self.function).parameters.values()):
            annotation = hints.get(param.name, Any)
            if annotation is ToolContext:
                context_param = param.name
                continue
            if param.kind is param.VAR_KEYWORD:
                extra = "allow"
                continue
            if param.kind in (param.VAR_POSITIONAL, param.POSITIONAL_ONLY):
                raise ConfigError(
                    f"tool {self.name!r}: parameter {param.name!r} must accept a keyword"
                )
            default = ... if param.default is param.empty else param.default
            field = Field(default, alias=param.name, description=param_docs.get(param.name))
            fields[f"p{index}"] = (annotation, field)  # aliases avoid clashes with BaseModel names
            if not _is_plain(annotation):
                converters[param.name] = TypeAdapter(annotation)
        config = ConfigDict(extra=extra, populate_by_name=False)
        try:
            model = pydantic.create_model(f"{self.name}_arguments", __config__=config, **fields)
            schema = strip_titles(model.model_json_schema(by_alias=True))
        except Exception as exc:
            raise ConfigError(f"tool {self.name!r}: cannot build a schema: {exc}") from exc
        root: dict[str, Any] = {
            "type": "object",
            "properties": schema.get("properties", {}),
            "required": schema.get("required", []),
        }
        if extra == "forbid":
            root["additionalProperties"] = False
        if "$defs" in schema:
            root["$defs"] = schema["$defs"]
        return root, context_param, converters

    async def execute(self, arguments: dict[str, Any], ctx: ToolContext) -> Any:
        kwargs = arguments
        if self._converters or self._context_param:
            kwargs = dict(arguments)
            for key, adapter in self._converters.items():
                if key in kwargs:
                    try:
                        kwargs[key] = adapter.validate_python(kwargs[key])
                    except pydantic.ValidationError as exc:
                        detail = exc.errors()[0]["msg"]
                        raise InvalidArguments(f"{key}: {detail}") from exc
            if self._context_param:
                kwargs[self._context_param] = ctx
        if self._is_async:
            result = await self.function(**kwargs)
        elif self.policy.isolation == "inline":
            result = self.function(**kwargs)
        elif self.policy.isolation == "process":
            result = await default_pool().run(self.function, **kwargs)
        else:
            result = await asyncio.to_thread(self.function, **kwargs)
        return result.model_dump(mode="json") if isinstance(result, BaseModel) else result

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the wrapped function directly (handy in tests)."""
        return self.function(*args, **kwargs)


@overload
def tool(function: AnyFunction, /) -> FunctionTool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    inline: bool = False,
    **policy: Any,
) -> Callable[[AnyFunction], FunctionTool]: ...


def tool(
    function: AnyFunction | None = None, /, **policy: Any
) -> FunctionTool | Callable[[AnyFunction], FunctionTool]:
    """Turn a typed function into a :class:`FunctionTool` (``@tool`` or ``@tool(...)``).

    Keywords: ``name``, ``description``, ``inline`` and the fields of :class:`ToolPolicy`.
    """
    if function is not None:
        return FunctionTool(function, **policy)

    def decorate(fn: AnyFunction) -> FunctionTool:
        return FunctionTool(fn, **policy)

    return decorate
