"""File tools confined to the context's workspace (:class:`node.tooling.guards.Workspace`).

Paths are relative to the workspace root (or absolute inside an allowed root); anything that
resolves outside, through ``..`` or a symlink, is refused. Results show paths relative to the
root, never where the root lives.
"""

from __future__ import annotations

import re
from fnmatch import fnmatch
from itertools import islice
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

from node.errors import GuardError, InvalidArguments, ToolError
from node.tooling import ToolContext, tool
from node.tooling.guards import Workspace, atomic_write

__all__ = ["grep", "list_dir", "read_file", "write_file"]

MAX_LINE_CHARS = 300  # a grep match shows at most this much of its line
MAX_SCAN_FILES = 20_000  # grep looks at no more paths than this
MAX_FILE_BYTES = 5_000_000  # grep skips larger files
MAX_SCAN_BYTES = 50_000_000  # grep stops (truncated) after reading this much
SNIFF_BYTES = 8192


def _workspace(ctx: ToolContext) -> Workspace:
    if ctx.workspace is None:
        raise ToolError("file tools are disabled on this node (no workspace configured)")
    return ctx.workspace


def _is_binary(head: bytes) -> bool:
    return b"\x00" in head[:SNIFF_BYTES]


def _read(file: Path, given: str) -> bytes:
    try:
        return file.read_bytes()
    except OSError as exc:
        raise ToolError(f"cannot read {given!r}: {exc.strerror}") from exc


@tool(read_only=True, tags=("files",), examples=("Read notes/todo.md",))
def read_file(
    path: str,
    ctx: ToolContext,
    offset: Annotated[int, Field(ge=0)] = 0,
    max_bytes: Annotated[int, Field(ge=1, le=1_000_000)] = 100_000,
) -> dict[str, Any]:
    """Read a UTF-8 text file from the workspace, at most max_bytes from offset.

    Args:
        path: File path, relative to the workspace root.
        offset: Byte offset to start reading from (to page through a large file).
        max_bytes: Read at most this many bytes; "truncated" tells whether more remains.
    """
    workspace = _workspace(ctx)
    target = workspace.resolve_read(path)
    if target.is_dir():
        raise ToolError(f"{path!r} is a directory; use list_dir to see its entries")
    try:
        size = target.stat().st_size
        with target.open("rb") as handle:
            head = handle.read(SNIFF_BYTES)
            handle.seek(offset)
            data = handle.read(max_bytes)
    except OSError as exc:
        raise ToolError(f"cannot read {path!r}: {exc.strerror}") from exc
    if _is_binary(head):
        raise ToolError(f"{path!r} is a binary file; only text files can be read")
    return {
        "path": workspace.relative(target),
        "size": size,
        "offset": offset,
        "truncated": offset + len(data) < size,
        "content": data.decode("utf-8", errors="replace"),
    }


@tool(read_only=False, exclusive=True, tags=("files",), examples=("Write 'hello' to out/a.txt",))
def write_file(
    path: str,
    content: Annotated[str, Field(max_length=10_000_000)],
    ctx: ToolContext,
    overwrite: bool = True,
) -> dict[str, Any]:
    """Write text to a file in the workspace, atomically; missing parent folders are created.

    Args:
        path: File path, relative to the workspace root.
        content: The complete new content of the file (UTF-8 text).
        overwrite: Replace the file if it exists; when false, an existing file is an error.
    """
    workspace = _workspace(ctx)
    target = workspace.resolve_write(path)
    existed = target.exists()
    if target.is_dir():
        raise ToolError(f"{path!r} is a directory; give a file path")
    if existed and not overwrite:
        raise ToolError(f"{path!r} already exists; pass overwrite=true to replace it")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        written = atomic_write(target, content)
    except OSError as exc:
        raise ToolError(f"cannot write {path!r}: {exc.strerror}") from exc
    return {"path": workspace.relative(target), "bytes": written, "created": not existed}


def _entry(path: Path) -> dict[str, Any]:
    if path.is_symlink():
        return {"name": path.name, "type": "link"}
    if path.is_dir():
        return {"name": path.name, "type": "dir"}
    return {"name": path.name, "type": "file", "size": path.stat().st_size}


@tool(read_only=True, tags=("files",), examples=("List the Python files in src",))
def list_dir(
    ctx: ToolContext,
    path: str = ".",
    pattern: str | None = None,
    max_entries: Annotated[int, Field(ge=1, le=5000)] = 500,
) -> dict[str, Any]:
    """List a workspace folder (not recursive): folders first, then files, by name.

    Args:
        path: Folder path, relative to the workspace root.
        pattern: Shell-style pattern on entry names, such as "*.py" (default: all).
        max_entries: Return at most this many entries; "truncated" tells whether more exist.
    """
    workspace = _workspace(ctx)
    folder = workspace.resolve_read(path)
    if not folder.is_dir():
        raise ToolError(f"{path!r} is a file, not a folder; use read_file to read it")
    try:
        children = [c for c in folder.iterdir() if pattern is None or fnmatch(c.name, pattern)]
        entries = [_entry(child) for child in children]
    except OSError as exc:
        raise ToolError(f"cannot list {path!r}: {exc.strerror}") from exc
    entries.sort(key=lambda e: (e["type"] != "dir", e["name"]))
    return {
        "path": workspace.relative(folder),
        "entries": entries[:max_entries],
        "truncated": len(entries) > max_entries,
    }


def _files(workspace: Workspace, base: Path, glob: str) -> list[Path]:
    if base.is_file():
        return [base]
    if Path(glob).is_absolute() or ".." in Path(glob).parts:
        raise GuardError(f"glob {glob!r} must be relative to the searched folder, without '..'")
    try:
        candidates = sorted(islice(base.glob(glob), MAX_SCAN_FILES))
    except (ValueError, NotImplementedError) as exc:
        raise InvalidArguments(f"invalid glob {glob!r}: {exc}") from exc
    files: list[Path] = []
    for candidate in candidates:
        try:
            real = workspace.resolve_read(candidate)
        except ToolError:  # a symlink that leads outside, or vanished meanwhile
            continue
        if real.is_file() and real.stat().st_size <= MAX_FILE_BYTES:
            files.append(candidate)
    return files


@tool(read_only=True, tags=("files", "search"), examples=("Find TODO in all .py files",))
def grep(
    pattern: Annotated[str, Field(min_length=1, max_length=1000)],
    ctx: ToolContext,
    path: str = ".",
    glob: str = "**/*",
    ignore_case: bool = False,
    max_matches: Annotated[int, Field(ge=1, le=10_000)] = 200,
) -> dict[str, Any]:
    """Search workspace text files for a regular expression; binary files are skipped.

    Args:
        pattern: A Python regular expression, such as "TODO|FIXME" or "def \\w+".
        path: File or folder to search, relative to the workspace root.
        glob: Which files under the folder to search, such as "**/*.py" (default: all).
        ignore_case: Match letters regardless of case.
        max_matches: Stop after this many matching lines; "truncated" tells whether it stopped.
    """
    workspace = _workspace(ctx)
    try:
        regex = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
    except re.error as exc:
        raise InvalidArguments(f"invalid regular expression {pattern!r}: {exc}") from exc
    matches: list[dict[str, Any]] = []
    scanned = budget = 0
    for file in _files(workspace, workspace.resolve_read(path), glob):
        data = _read(file, path)
        budget += len(data)
        if budget > MAX_SCAN_BYTES:
            return {"matches": matches, "files_scanned": scanned, "truncated": True}
        if _is_binary(data):
            continue
        scanned += 1
        shown = workspace.relative(file)
        for number, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
            if regex.search(line):
                if len(matches) == max_matches:
                    return {"matches": matches, "files_scanned": scanned, "truncated": True}
                matches.append({"path": shown, "line": number, "text": line[:MAX_LINE_CHARS]})
    return {"matches": matches, "files_scanned": scanned, "truncated": False}
