"""grep runs patterns on RE2: linear time whatever the pattern; unsupported syntax is refused."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from node.errors import ErrorKind, InvalidArguments
from node.tooling import Toolbox, ToolContext, ToolRunner
from tools.files import grep

CATASTROPHIC = r"^(\w+\s?)*$"  # Python's re: 2^30 steps on 31 letters and a "!", ~1 minute


@pytest.fixture
def root(ws_ctx: ToolContext) -> Path:
    assert ws_ctx.workspace is not None
    return ws_ctx.workspace.root


async def test_the_catastrophic_pattern_returns_at_once_with_the_right_matches(
    ws_ctx: ToolContext, root: Path
) -> None:
    (root / "r.txt").write_text("a" * 31 + "!\nhello world\n" + "word " * 2000 + "!\n")
    start = time.monotonic()
    result = await ToolRunner(Toolbox([grep])).run_one(
        "grep", {"pattern": CATASTROPHIC, "path": "r.txt"}, ws_ctx
    )
    assert time.monotonic() - start < 1.0
    assert result.ok, result.error
    assert result.output["matches"] == [{"path": "r.txt", "line": 2, "text": "hello world"}]


@pytest.mark.parametrize(
    ("pattern", "reason"),
    [
        (r"(a)\1", "invalid escape sequence"),
        (r"foo(?=bar)", "invalid perl operator"),
        (r"(?<!x)y", "invalid perl operator"),
        ("(unclosed", "missing )"),
    ],
)
async def test_unsupported_syntax_is_an_invalid_arguments_result(
    ws_ctx: ToolContext, root: Path, pattern: str, reason: str
) -> None:
    (root / "r.txt").write_text("foobar\n")
    result = await ToolRunner(Toolbox([grep])).run_one(
        "grep", {"pattern": pattern, "path": "r.txt"}, ws_ctx
    )
    assert result.error_kind == ErrorKind.INVALID_ARGUMENTS
    assert reason in (result.error or "")
    assert "no backreferences" in (result.error or "")
    assert "lookaround" in (result.error or "")


async def test_ignore_case_and_unicode_letters(ws_ctx: ToolContext, root: Path) -> None:
    (root / "u.txt").write_text("Héllo Wörld\nplain\n")
    result = await grep.execute({"pattern": r"w\pLrld", "ignore_case": True}, ws_ctx)
    assert result["matches"] == [{"path": "u.txt", "line": 1, "text": "Héllo Wörld"}]


async def test_patterns_beyond_re2_limits_are_refused(ws_ctx: ToolContext) -> None:
    with pytest.raises(InvalidArguments, match="invalid repetition size"):
        await grep.execute({"pattern": "((((a{100}){100}){100}){100})"}, ws_ctx)
    with pytest.raises(InvalidArguments, match="pattern too large"):
        await grep.execute({"pattern": r"(\pL{1,50}\s?){1,20}"}, ws_ctx)


async def test_nested_recursive_globs_are_refused_before_walking(
    ws_ctx: ToolContext, root: Path
) -> None:
    for i in range(5):
        (root / f"d{i}" / "e").mkdir(parents=True)
        (root / f"d{i}" / "e" / "f.txt").write_text("needle\n")
    with pytest.raises(InvalidArguments, match=r"one '\*\*'"):
        await grep.execute({"pattern": "needle", "glob": "**/" * 40 + "x/**/*"}, ws_ctx)
    collapsed = await grep.execute({"pattern": "needle", "glob": "**/**/**/*.txt"}, ws_ctx)
    assert len(collapsed["matches"]) == 5
