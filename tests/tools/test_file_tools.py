from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from fastjsonschema import JsonSchemaValueException

from node.errors import GuardError, InvalidArguments, ToolError
from node.tooling import ToolContext
from node.tooling.guards import Workspace
from tools.files import grep, list_dir, read_file, write_file

Call = Callable[..., Awaitable[Any]]


@pytest.fixture
def root(ws_ctx: ToolContext) -> Path:
    assert ws_ctx.workspace is not None
    root = ws_ctx.workspace.root
    (root / "src").mkdir()
    (root / "src" / "a.py").write_text("import os\n# TODO: fix\ndef main():\n    pass\n")
    (root / "src" / "b.txt").write_text("todo later\nnothing\n")
    (root / "img.bin").write_bytes(b"\x89PNG\x00\x00TODO")
    (root / "notes.md").write_text("héllo wörld\n")
    (root.parent / "outside.txt").write_text("TODO secret\n")
    return root


@pytest.mark.parametrize("tool", [read_file, write_file, list_dir, grep])
async def test_file_tools_refuse_without_a_workspace(call: Call, tool: Any) -> None:
    arguments = {"path": "x", "content": "", "pattern": "x"}
    arguments = {k: v for k, v in arguments.items() if k in tool.parameters["properties"]}
    with pytest.raises(ToolError, match="no workspace"):
        await call(tool, ToolContext(), **arguments)


async def test_read_file_returns_text_and_metadata(
    call: Call, ws_ctx: ToolContext, root: Path
) -> None:
    result = await call(read_file, ws_ctx, path="notes.md")
    assert result == {
        "path": "notes.md",
        "size": len("héllo wörld\n".encode()),
        "offset": 0,
        "truncated": False,
        "content": "héllo wörld\n",
    }


async def test_read_file_pages_with_offset_and_max_bytes(
    call: Call, ws_ctx: ToolContext, root: Path
) -> None:
    first = await call(read_file, ws_ctx, path="src/a.py", max_bytes=6)
    assert (first["content"], first["truncated"]) == ("import", True)
    rest = await call(read_file, ws_ctx, path="src/a.py", offset=7)
    assert rest["content"].startswith("os\n")
    assert rest["truncated"] is False


async def test_read_file_refusals(call: Call, ws_ctx: ToolContext, root: Path) -> None:
    with pytest.raises(GuardError, match="outside"):
        await call(read_file, ws_ctx, path="../outside.txt")
    with pytest.raises(ToolError, match="does not exist"):
        await call(read_file, ws_ctx, path="missing.txt")
    with pytest.raises(ToolError, match="directory"):
        await call(read_file, ws_ctx, path="src")
    with pytest.raises(ToolError, match="binary"):
        await call(read_file, ws_ctx, path="img.bin")
    with pytest.raises(JsonSchemaValueException):
        await call(read_file, ws_ctx, path="notes.md", max_bytes=0)


async def test_write_file_creates_parents_and_reports(
    call: Call, ws_ctx: ToolContext, root: Path
) -> None:
    result = await call(write_file, ws_ctx, path="out/deep/r.txt", content="ünï")
    assert result == {"path": "out/deep/r.txt", "bytes": 5, "created": True}
    assert (root / "out" / "deep" / "r.txt").read_text() == "ünï"
    again = await call(write_file, ws_ctx, path="out/deep/r.txt", content="new")
    assert again["created"] is False
    assert (root / "out" / "deep" / "r.txt").read_text() == "new"


async def test_write_file_without_overwrite_keeps_existing(
    call: Call, ws_ctx: ToolContext, root: Path
) -> None:
    with pytest.raises(ToolError, match="already exists"):
        await call(write_file, ws_ctx, path="notes.md", content="x", overwrite=False)
    assert (root / "notes.md").read_text() == "héllo wörld\n"


async def test_write_file_refusals(call: Call, ws_ctx: ToolContext, root: Path) -> None:
    with pytest.raises(GuardError, match="outside"):
        await call(write_file, ws_ctx, path="../evil.txt", content="x")
    (root / "link").symlink_to(root.parent)
    with pytest.raises(GuardError, match="outside"):
        await call(write_file, ws_ctx, path="link/evil.txt", content="x")
    assert not (root.parent / "evil.txt").exists()
    with pytest.raises(ToolError, match="directory"):
        await call(write_file, ws_ctx, path="src", content="x")
    with pytest.raises(ToolError, match="cannot write"):
        await call(write_file, ws_ctx, path="notes.md/child.txt", content="x")


async def test_write_file_in_a_read_only_workspace(call: Call, root: Path) -> None:
    ctx = ToolContext(workspace=Workspace(root, writable=False))
    with pytest.raises(GuardError, match="read-only"):
        await call(write_file, ctx, path="new.txt", content="x")


def test_write_file_policy() -> None:
    assert not write_file.read_only
    assert write_file.exclusive
    assert not write_file.concurrency_safe
    assert read_file.concurrency_safe
    assert list_dir.concurrency_safe
    assert grep.concurrency_safe


async def test_list_dir_lists_folders_first(call: Call, ws_ctx: ToolContext, root: Path) -> None:
    result = await call(list_dir, ws_ctx)
    assert result["path"] == "."
    assert result["entries"] == [
        {"name": "src", "type": "dir"},
        {"name": "img.bin", "type": "file", "size": 10},
        {"name": "notes.md", "type": "file", "size": 14},
    ]
    assert result["truncated"] is False


async def test_list_dir_pattern_limit_and_links(
    call: Call, ws_ctx: ToolContext, root: Path
) -> None:
    (root / "src" / "link.py").symlink_to(root.parent / "outside.txt")
    result = await call(list_dir, ws_ctx, path="src", pattern="*.py")
    assert result["entries"] == [
        {"name": "a.py", "type": "file", "size": 43},
        {"name": "link.py", "type": "link"},
    ]
    limited = await call(list_dir, ws_ctx, max_entries=1)
    assert (len(limited["entries"]), limited["truncated"]) == (1, True)


async def test_list_dir_refusals(call: Call, ws_ctx: ToolContext, root: Path) -> None:
    with pytest.raises(GuardError, match="outside"):
        await call(list_dir, ws_ctx, path="..")
    with pytest.raises(ToolError, match="is a file"):
        await call(list_dir, ws_ctx, path="notes.md")


async def test_grep_finds_matches_and_skips_binary(
    call: Call, ws_ctx: ToolContext, root: Path
) -> None:
    result = await call(grep, ws_ctx, pattern="TODO")
    assert result["matches"] == [{"path": "src/a.py", "line": 2, "text": "# TODO: fix"}]
    assert result["files_scanned"] == 3  # notes.md, src/a.py, src/b.txt; img.bin skipped
    assert result["truncated"] is False


async def test_grep_options(call: Call, ws_ctx: ToolContext, root: Path) -> None:
    found = await call(grep, ws_ctx, pattern="todo", ignore_case=True, glob="**/*.txt")
    assert found["matches"] == [{"path": "src/b.txt", "line": 1, "text": "todo later"}]
    single = await call(grep, ws_ctx, pattern=r"def \w+", path="src/a.py")
    assert single["matches"][0]["line"] == 3
    limited = await call(grep, ws_ctx, pattern=".", max_matches=2)
    assert (len(limited["matches"]), limited["truncated"]) == (2, True)


async def test_grep_does_not_follow_links_outside(
    call: Call, ws_ctx: ToolContext, root: Path
) -> None:
    (root / "escape.txt").symlink_to(root.parent / "outside.txt")
    (root / "escape_dir").symlink_to(root.parent)
    result = await call(grep, ws_ctx, pattern="secret", glob="**/*")
    assert result["matches"] == []
    result = await call(grep, ws_ctx, pattern="secret", glob="escape_dir/*")
    assert result["matches"] == []


async def test_grep_refusals(call: Call, ws_ctx: ToolContext, root: Path) -> None:
    with pytest.raises(InvalidArguments, match="invalid regular expression"):
        await call(grep, ws_ctx, pattern="(unclosed")
    with pytest.raises(GuardError, match="glob"):
        await call(grep, ws_ctx, pattern="x", glob="../*")
    with pytest.raises(GuardError, match="glob"):
        await call(grep, ws_ctx, pattern="x", glob="/etc/*")
    with pytest.raises(GuardError, match="outside"):
        await call(grep, ws_ctx, pattern="x", path="../outside.txt")
    with pytest.raises(JsonSchemaValueException):
        await call(grep, ws_ctx, pattern="")
