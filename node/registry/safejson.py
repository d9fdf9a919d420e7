"""The registry's JSON rules: what it accepts (bodies, fetched cards, stored rows) and emits.

Accepted JSON is UTF-8 text of RFC 8259 values whose numbers are finite IEEE doubles (no
``NaN``/``Infinity``, nothing like ``1e400`` or a 400-digit integer), nested at most
:data:`MAX_DEPTH` levels, and whose strings and keys hold neither NUL nor unpaired surrogates
(PostgreSQL refuses NUL in text, and nothing can encode a lone surrogate as UTF-8). Output is
written the way Starlette's ``JSONResponse`` writes it, so what passes :func:`dumps` can be served.
"""

from __future__ import annotations

import json
import math
import re
import sys
from typing import Any

__all__ = ["MAX_DEPTH", "UnsafeJson", "check", "dumps", "loads"]

MAX_DEPTH = 64
"""Deepest nesting of arrays and objects accepted anywhere (a card's schemas need ~20)."""

_BAD_CHAR = re.compile("[\x00\ud800-\udfff]")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,39}")
_MAX_DOUBLE = int(sys.float_info.max)
_DIGITS_OF_MAX_DOUBLE = len(str(_MAX_DOUBLE))
_ZERO_DIGITS = bytes.maketrans(b"123456789", b"000000000")
# Without a 300-digit run or a 3-digit exponent, every JSON number is a finite double.
_LONG_DIGIT_RUN = b"0" * 300
_LONG_EXPONENTS = (b"e000", b"E000", b"e+000", b"E+000")


class UnsafeJson(ValueError):
    """The text is not JSON the registry accepts; the message says why (and where)."""


def loads(raw: bytes | str) -> Any:
    """Parse ``raw`` (UTF-8 when bytes) under the rules above; :class:`UnsafeJson` otherwise.

    Costs about what ``json.loads`` costs. The rules are checked on the bytes first with C-speed
    scans, and the slower checks run only when a scan says they might fail: number hooks when a
    300-digit run or a 3-digit exponent occurs, a walk over the containers when there are more
    than :data:`MAX_DEPTH` brackets, a walk over the strings when a ``\\u0000`` or
    ``\\uD8xx``-style escape occurs (or, for ``str`` input, a raw NUL or surrogate).
    """
    if isinstance(raw, bytes):
        data = raw
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise UnsafeJson(f"not valid UTF-8 (byte {exc.start})") from exc
        suspicious = False  # strict UTF-8 holds no surrogates; the parser refuses raw NUL
    else:
        text = raw
        try:
            data = text.encode("utf-8")
            suspicious = "\x00" in text
        except UnicodeEncodeError:
            data = text.encode("utf-8", "surrogatepass")
            suspicious = True
    zeroed = data.translate(_ZERO_DIGITS)
    huge = _LONG_DIGIT_RUN in zeroed or any(e in zeroed for e in _LONG_EXPONENTS)
    try:
        value = (_CHECKING_NUMBERS if huge else _DECODER).decode(text)
    except RecursionError as exc:
        raise UnsafeJson(f"nested deeper than {MAX_DEPTH} levels") from exc
    except UnsafeJson:
        raise
    except ValueError as exc:  # JSONDecodeError, or Python's limit on integer digits
        if not isinstance(exc, json.JSONDecodeError):
            raise UnsafeJson("a number has too many digits (must be a finite double)") from exc
        raise UnsafeJson(f"not valid JSON: {exc}") from exc
    if (
        suspicious
        or b"\\u0000" in data
        or b"\\ud" in data
        or b"\\uD" in data
        or (data.count(b"[") + data.count(b"{") > MAX_DEPTH and not _shallow(value))
    ):
        check(value)  # the slow walk, which says what is wrong and where
    return value


def check(value: Any) -> None:
    """Raise :class:`UnsafeJson` unless ``value`` (parsed JSON) follows the rules above."""
    _walk(value, 0, ())


def dumps(value: Any) -> bytes:
    """``value`` as compact UTF-8 JSON, exactly as ``JSONResponse`` renders it.

    Raises ``ValueError`` (non-finite numbers, circular data), ``TypeError`` (not JSON data),
    ``UnicodeEncodeError`` (lone surrogates) or ``RecursionError``; callers that serve stored data
    catch all four.
    """
    return json.dumps(
        value, ensure_ascii=False, allow_nan=False, indent=None, separators=(",", ":")
    ).encode("utf-8")


def _refuse_constant(name: str) -> Any:
    raise UnsafeJson(f"{name} is not a JSON number (numbers must be finite)")


def _float(literal: str) -> float:
    value = float(literal)
    if not math.isfinite(value):
        raise UnsafeJson(f"the number {literal[:20]} is not a finite double")
    return value


def _int(literal: str) -> int:
    digits = len(literal) - literal.startswith("-")
    if digits >= _DIGITS_OF_MAX_DOUBLE and (
        digits > _DIGITS_OF_MAX_DOUBLE or not _scalar_ok(int(literal))
    ):
        raise UnsafeJson(f"a {digits}-digit integer is too large (must be a finite double)")
    return int(literal)


_DECODER = json.JSONDecoder(parse_constant=_refuse_constant)
_CHECKING_NUMBERS = json.JSONDecoder(
    parse_constant=_refuse_constant, parse_float=_float, parse_int=_int
)


def _shallow(value: Any) -> bool:
    """Whether ``value`` nests at most MAX_DEPTH levels (one pass over its containers)."""
    level = [value] if isinstance(value, dict | list) else []
    for _ in range(MAX_DEPTH):
        below = [
            item
            for container in level
            for item in (container.values() if type(container) is dict else container)
            if type(item) is dict or type(item) is list
        ]
        if not below:
            return True
        level = below
    return False


def _scalar_ok(value: Any) -> bool:
    if type(value) is float:
        return math.isfinite(value)
    if type(value) is int:
        return -_MAX_DOUBLE <= value <= _MAX_DOUBLE
    return True


def _where(path: tuple[str | int, ...]) -> str:
    """A JSONPath-like location for messages: ``$.skills[2].tags[0]``."""
    out = ["$"]
    for part in path:
        if isinstance(part, int):
            out.append(f"[{part}]")
        elif _NAME.fullmatch(part):
            out.append(f".{part}")
        else:
            out.append(f"[{part[:40]!r}]")
    where = "".join(out)
    return where if len(where) <= 120 else where[:60] + "..." + where[-57:]


def _walk(value: Any, depth: int, path: tuple[str | int, ...]) -> None:
    if isinstance(value, str):
        if (bad := _BAD_CHAR.search(value)) is not None:
            raise UnsafeJson(f"the string at {_where(path)} contains {_describe(bad.group())}")
    elif isinstance(value, bool) or value is None:
        return
    elif isinstance(value, int):
        if not _scalar_ok(value):
            raise UnsafeJson(f"the number at {_where(path)} is too large for a double")
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise UnsafeJson(f"the number at {_where(path)} is not finite ({value})")
    elif isinstance(value, dict | list):
        if depth >= MAX_DEPTH:
            raise UnsafeJson(f"nested deeper than {MAX_DEPTH} levels at {_where(path)}")
        if isinstance(value, list):
            for index, item in enumerate(value):
                _walk(item, depth + 1, (*path, index))
            return
        for key, item in value.items():
            if not isinstance(key, str):
                raise UnsafeJson(f"a key at {_where(path)} is not a string")
            if (bad := _BAD_CHAR.search(key)) is not None:
                raise UnsafeJson(f"a key at {_where(path)} contains {_describe(bad.group())}")
            _walk(item, depth + 1, (*path, key))
    else:
        raise UnsafeJson(f"the value at {_where(path)} is not JSON ({type(value).__name__})")


def _describe(char: str) -> str:
    return "a NUL character" if char == "\x00" else "an unpaired UTF-16 surrogate"


def finite_number(value: float) -> bool:
    """Whether ``value`` (an int or float) is a finite IEEE double."""
    return _scalar_ok(value)
