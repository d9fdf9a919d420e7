"""File tool errors name workspace-relative paths (or the path as given), never the real root."""

from __future__ import annotations

from typing import Any

import pytest

from node.errors import ErrorKind
from node.tooling import Toolbox, ToolContext, ToolRunner
from tools.files import grep, list_dir, read_file, write_file

LONG = "x" * 300
DEEP = "/".join(["y" * 200] * 30)
CALLS: list[tuple[str, dict[str, Any], str]] = [
    ("read_file", {"path": LONG}, "too long"),
    ("read_file", {"path": DEEP}, "too long"),
    ("write_file", {"path": LONG, "content": "a"}, "too long"),
    ("write_file", {"path": f"a/{LONG}/b", "content": "a"}, "too long"),
    ("list_dir", {"path": LONG}, "too long"),
    ("grep", {"pattern": "a", "path": LONG}, "too long"),
    ("grep", {"pattern": "a", "glob": LONG}, "too long"),
    ("read_file", {"path": "bad\ud800name"}, "not valid text"),
]


@pytest.mark.parametrize(("name", "arguments", "reason"), CALLS, ids=lambda v: str(v)[:20])
async def test_bad_paths_are_guard_errors_that_never_show_the_root(
    ws_ctx: ToolContext, name: str, arguments: dict[str, Any], reason: str
) -> None:
    assert ws_ctx.workspace is not None
    root = str(ws_ctx.workspace.root)
    runner = ToolRunner(Toolbox([grep, list_dir, read_file, write_file]))
    result = await runner.run_one(name, arguments, ws_ctx)
    assert (result.ok, result.error_kind) == (False, ErrorKind.GUARD), result.error
    assert reason in (result.error or "")
    assert root not in (result.error or "")
    assert len(result.error or "") < 300  # the given path is quoted cut short


async def test_an_unexpected_error_message_has_the_root_redacted(ws_ctx: ToolContext) -> None:
    from node.tooling import tool

    assert ws_ctx.workspace is not None
    root = ws_ctx.workspace.root

    @tool
    def leaky(ctx: ToolContext) -> None:
        """Raise an OSError naming an absolute path inside the workspace."""
        open(root / "missing" / "file.txt")  # noqa: SIM115

    result = await ToolRunner(Toolbox([leaky])).run_one("leaky", {}, ws_ctx)
    assert str(root) not in (result.error or "")
    assert "<workspace>/missing/file.txt" in (result.error or "")
