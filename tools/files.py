r"""File tools confined to the context's workspace (:class:`node.tooling.guards.Workspace`).

Paths are relative to the workspace root (or absolute inside an allowed root); anything that
resolves outside, through ``..`` or a symlink, is refused. Results and errors show paths relative
to the root (or as given), never where the root lives: a filesystem error is reported by its
reason, not by its text, which would quote the absolute path.

``grep`` patterns run on RE2 (``google-re2``), a linear-time engine, and not on Python's ``re``,
which backtracks: ``^(\w+\s?)*$`` over one line of 31 letters and a ``!`` tries 2^30 ways to
split the letters (about a minute, doubling with every further letter) while holding the GIL, so
the event loop and every timeout of the node freeze with it. Running ``re`` in a child process
killed at the timeout would bound the damage too, but each search would pay for a process and
burn a core until the kill; RE2 guarantees time linear in the text for every pattern, so a search
costs about what reading the files costs. That guarantee is why RE2 has no backreferences
(``\1``) and no lookaround (``(?=``, ``(?!``, ``(?<=``, ``(?<!``): such patterns get an
``invalid_arguments`` result that says so. The scan itself (up to ``MAX_SCAN_BYTES``, a few
microseconds per line) runs in a worker process (:func:`node.tooling.run_in_process`), so its
timeout kills it instead of leaving a thread to finish it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from fnmatch import fnmatch
from itertools import islice
from pathlib import Path, PurePosixPath
from typing import Annotated, Any

import re2
from pydantic import Field

from node.errors import GuardError, InvalidArguments, ToolError, ToolExecutionError
from node.tooling import ToolContext, run_in_process, tool
from node.tooling.guards import Workspace, atomic_write
from node.tooling.guards.paths import NAME_MAX, os_error_reason, shown

__all__ = ["grep", "list_dir", "read_file", "search", "write_file"]

MAX_LINE_CHARS = 300  # a grep match shows at most this much of its line
MAX_SCAN_FILES = 20_000  # grep looks at no more paths than this
MAX_FILE_BYTES = 5_000_000  # grep skips larger files
MAX_SCAN_BYTES = 50_000_000  # grep stops (truncated) after reading this much
SNIFF_BYTES = 8192
RE2_MAX_MEM = 8 << 20  # bytes RE2 may use for one compiled pattern
_RE2_SYNTAX = (
    "patterns use RE2 syntax, which runs in linear time: no backreferences (\\1) and no "
    "lookaround ((?=...), (?!...), (?<=...), (?<!...)); \\w, \\d and \\b are ASCII-only "
    "(\\pL is any letter) and the end of text is \\z"
)


def _workspace(ctx: ToolContext) -> Workspace:
    if ctx.workspace is None:
        raise ToolExecutionError("file tools are disabled on this node (no workspace configured)")
    return ctx.workspace


def _is_binary(head: bytes) -> bool:
    return b"\x00" in head[:SNIFF_BYTES]


@contextlib.contextmanager
def _os_errors(action: str, path: str) -> Iterator[None]:
    """Report an ``OSError`` as a :class:`ToolError` naming ``path`` (never the absolute one)."""
    try:
        yield
    except OSError as exc:
        raise ToolExecutionError(f"cannot {action} {shown(path)}: {os_error_reason(exc)}") from exc


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
    with _os_errors("read", path):
        if target.is_dir():
            raise ToolExecutionError(
                f"{shown(path)} is a directory; use list_dir to see its entries"
            )
        size = target.stat().st_size
        with target.open("rb") as handle:
            head = handle.read(SNIFF_BYTES)
            handle.seek(offset)
            data = handle.read(max_bytes)
    if _is_binary(head):
        raise ToolExecutionError(f"{shown(path)} is a binary file; only text files can be read")
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
    with _os_errors("write", path):
        existed = target.exists()
        if target.is_dir():
            raise ToolExecutionError(f"{shown(path)} is a directory; give a file path")
        if existed and not overwrite:
            raise ToolExecutionError(
                f"{shown(path)} already exists; pass overwrite=true to replace it"
            )
        target.parent.mkdir(parents=True, exist_ok=True)
        written = atomic_write(target, content)
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
    with _os_errors("list", path):
        if not folder.is_dir():
            raise ToolExecutionError(
                f"{shown(path)} is a file, not a folder; use read_file to read it"
            )
        children = [c for c in folder.iterdir() if pattern is None or fnmatch(c.name, pattern)]
        entries = [_entry(child) for child in children]
    entries.sort(key=lambda e: (e["type"] != "dir", e["name"]))
    return {
        "path": workspace.relative(folder),
        "entries": entries[:max_entries],
        "truncated": len(entries) > max_entries,
    }


def _glob(glob: str) -> str:
    """``glob`` with runs of ``**`` collapsed; refused when it could leave the folder or when it
    holds two ``**`` (each one multiplies the walk by the size of the tree)."""
    path = PurePosixPath(glob)
    if path.is_absolute() or ".." in path.parts:
        raise GuardError(
            f"glob {shown(glob)} must be relative to the searched folder, without '..'"
        )
    if any(len(part.encode(errors="surrogatepass")) > NAME_MAX for part in path.parts):
        raise GuardError(f"glob {shown(glob)} is too long (at most {NAME_MAX} bytes per name)")
    parts: list[str] = []
    for part in path.parts:
        if not (part == "**" and parts and parts[-1] == "**"):
            parts.append(part)
    if parts.count("**") > 1:
        raise InvalidArguments(f"glob {shown(glob)} may hold one '**' (any depth) at most")
    return "/".join(parts) or "*"


def _files(workspace: Workspace, base: Path, glob: str) -> list[Path]:
    if base.is_file():
        return [base]
    try:
        candidates = sorted(islice(base.glob(_glob(glob)), MAX_SCAN_FILES))
    except (ValueError, NotImplementedError) as exc:
        raise InvalidArguments(f"invalid glob {shown(glob)}: {exc}") from exc
    files: list[Path] = []
    for candidate in candidates:
        try:
            real = workspace.resolve_read(candidate)
            if real.is_file() and real.stat().st_size <= MAX_FILE_BYTES:
                files.append(candidate)
        except (ToolError, OSError):  # a symlink that leads outside, or vanished meanwhile
            continue
    return files


def _compile(pattern: str, ignore_case: bool) -> Any:
    options = re2.Options()
    options.log_errors = False  # RE2 would print every refused pattern on stderr
    options.case_sensitive = not ignore_case
    options.max_mem = RE2_MAX_MEM
    try:
        return re2.compile(pattern, options)
    except re2.error as exc:
        detail = exc.args[0] if exc.args else ""
        reason = detail.decode(errors="replace") if isinstance(detail, bytes) else str(detail)
        raise InvalidArguments(
            f"invalid regular expression {shown(pattern)}: {reason}; {_RE2_SYNTAX}"
        ) from exc


@tool(read_only=True, tags=("files", "search"), examples=("Find TODO in all .py files",))
async def grep(
    pattern: Annotated[str, Field(min_length=1, max_length=1000)],
    ctx: ToolContext,
    path: str = ".",
    glob: Annotated[str, Field(min_length=1, max_length=500)] = "**/*",
    ignore_case: bool = False,
    max_matches: Annotated[int, Field(ge=1, le=10_000)] = 200,
) -> dict[str, Any]:
    """Search workspace text files for a regular expression; binary files are skipped.

    Patterns use RE2 syntax (linear time, whatever the pattern): the usual classes, groups,
    alternation and repetition, but no backreferences and no lookaround.

    Args:
        pattern: A regular expression in RE2 syntax, such as "TODO|FIXME" or "def \\w+".
        path: File or folder to search, relative to the workspace root.
        glob: Which files under the folder to search, such as "**/*.py" (default: all).
        ignore_case: Match letters regardless of case.
        max_matches: Stop after this many matching lines; "truncated" tells whether it stopped.
    """
    workspace = _workspace(ctx)
    return await run_in_process(search, workspace, pattern, path, glob, ignore_case, max_matches)


def search(
    workspace: Workspace, pattern: str, path: str, glob: str, ignore_case: bool, max_matches: int
) -> dict[str, Any]:
    """grep's work. It runs in a worker process: a search that outlives its call's timeout (up to
    MAX_SCAN_BYTES of lines, matched one by one) is killed with its worker, not left running."""
    regex = _compile(pattern, ignore_case)
    matches: list[dict[str, Any]] = []
    scanned = budget = 0
    base = workspace.resolve_read(path)
    with _os_errors("search", path):
        files = _files(workspace, base, glob)
    for file in files:
        shown_path = workspace.relative(file)
        with _os_errors("read", shown_path):
            data = file.read_bytes()
        budget += len(data)
        if budget > MAX_SCAN_BYTES:
            return {"matches": matches, "files_scanned": scanned, "truncated": True}
        if _is_binary(data):
            continue
        scanned += 1
        for number, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
            if regex.search(line):
                if len(matches) == max_matches:
                    return {"matches": matches, "files_scanned": scanned, "truncated": True}
                matches.append({"path": shown_path, "line": number, "text": line[:MAX_LINE_CHARS]})
    return {"matches": matches, "files_scanned": scanned, "truncated": False}
