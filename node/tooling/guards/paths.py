"""Workspace-confined paths: every file a tool touches must resolve under an allowed root.

    ws = Workspace("/srv/work", read_roots=["/srv/data"])
    ws.resolve_read("notes/a.txt")   # /srv/work/notes/a.txt (must exist)
    ws.resolve_write("../etc/x")     # GuardError: '../etc/x' is outside the workspace

Relative paths join the first root; absolute paths are allowed only inside a root. ``..`` and
symlinks are resolved before the check, so a symlink inside the workspace that points outside
is refused. Error messages quote the path as given (cut when long) and never reveal where the
roots live: names too long for the filesystem are refused before the filesystem sees them, and an
``OSError`` is reported by its reason alone (its text would name the absolute path).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

from node.errors import ConfigError, GuardError, ToolExecutionError

__all__ = ["NAME_MAX", "PATH_MAX", "Workspace", "atomic_write", "os_error_reason", "shown"]

StrPath = str | os.PathLike[str]
NAME_MAX = 255  # bytes in one path component (Linux, macOS)
PATH_MAX = 4096  # bytes in a whole path
_SHOWN = 120  # characters of a given path quoted in a message


def shown(path: str) -> str:
    """``path`` quoted for a message, cut to a readable length."""
    return repr(path if len(path) <= _SHOWN else f"{path[:_SHOWN]}…")


def _resolve_roots(roots: Sequence[StrPath]) -> tuple[Path, ...]:
    resolved: list[Path] = []
    for root in roots:
        try:
            path = Path(root).resolve(strict=True)
        except OSError as exc:
            raise ConfigError(f"workspace root {os.fspath(root)!r} does not exist") from exc
        if not path.is_dir():
            raise ConfigError(f"workspace root {os.fspath(root)!r} is not a directory")
        if path not in resolved:
            resolved.append(path)
    return tuple(resolved)


class Workspace:
    """Read and write roots for file tools.

    ``root`` is readable and writable, and relative paths join it. ``read_roots`` are extra
    read-only roots; ``write_roots`` are extra writable roots (also readable). Pass
    ``writable=False`` to make ``root`` read-only too. Roots must exist (:class:`ConfigError`).
    """

    def __init__(
        self,
        root: StrPath,
        *,
        read_roots: Sequence[StrPath] = (),
        write_roots: Sequence[StrPath] = (),
        writable: bool = True,
    ) -> None:
        self.root = _resolve_roots([root])[0]
        self.write_roots = _resolve_roots(([root] if writable else []) + list(write_roots))
        self.read_roots = _resolve_roots([root, *read_roots, *write_roots])

    def __repr__(self) -> str:  # no paths: a repr may end up in a result or a log
        return f"<Workspace read_roots={len(self.read_roots)} write_roots={len(self.write_roots)}>"

    def resolve_read(self, path: StrPath) -> Path:
        """Return the real path of an existing file or directory under a read root."""
        resolved = self._resolve(path, self.read_roots)
        try:
            exists = resolved.exists()
        except OSError as exc:
            raise ToolExecutionError(
                f"{shown(os.fspath(path))} cannot be read: {os_error_reason(exc)}"
            ) from exc
        if not exists:
            raise ToolExecutionError(f"{shown(os.fspath(path))} does not exist in the workspace")
        return resolved

    def resolve_write(self, path: StrPath) -> Path:
        """Return the real path of a file (existing or not) under a write root."""
        if not self.write_roots:
            raise GuardError("the workspace is read-only: no file may be written")
        resolved = self._resolve(path, self.write_roots)
        if resolved in self.write_roots:
            raise GuardError(f"{shown(os.fspath(path))} is a workspace root, not a file")
        return resolved

    def relative(self, path: Path) -> str:
        """Show a resolved path relative to its root (for results: never the real root)."""
        for root in self.read_roots:
            if path.is_relative_to(root):
                return path.relative_to(root).as_posix() or "."
        raise GuardError("path is outside the workspace")

    def _resolve(self, path: StrPath, roots: tuple[Path, ...]) -> Path:
        given = os.fspath(path) if isinstance(path, os.PathLike) else path
        if not isinstance(given, str) or not given.strip():
            raise GuardError("path must be a non-empty string")
        if "\x00" in given:
            raise GuardError(f"path {shown(given)} contains a NUL byte")
        try:
            encoded = os.fsencode(given)
        except UnicodeError as exc:
            raise GuardError(f"path {shown(given)} is not valid text") from exc
        if len(encoded) > PATH_MAX or any(len(part) > NAME_MAX for part in encoded.split(b"/")):
            raise GuardError(
                f"path {shown(given)} is too long (at most {NAME_MAX} bytes per name "
                f"and {PATH_MAX} in all)"
            )
        candidate = Path(given)
        if not candidate.is_absolute():
            candidate = self.root / candidate
        try:
            resolved = candidate.resolve()  # follows every symlink that exists, and ".."
        except (OSError, RuntimeError) as exc:  # symlink loops, bad names
            raise GuardError(
                f"path {shown(given)} cannot be resolved: {os_error_reason(exc)}"
            ) from exc
        if not any(resolved.is_relative_to(root) for root in roots):
            kind = "readable" if roots is self.read_roots else "writable"
            raise GuardError(f"path {shown(given)} is outside the {kind} workspace")
        return resolved


def os_error_reason(exc: BaseException) -> str:
    """Why an ``OSError`` happened, without the path its text would quote."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return type(exc).__name__


def atomic_write(path: StrPath, data: bytes | str, *, encoding: str = "utf-8") -> int:
    """Write ``data`` to ``path`` atomically (temp file, fsync, rename); return bytes written.

    Readers see the old content or the new one, never a mix. An existing file keeps its mode.
    """
    target = Path(path)
    payload = data.encode(encoding) if isinstance(data, str) else data
    try:
        mode = target.stat().st_mode & 0o7777
    except FileNotFoundError:
        mode = 0o644
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
            handle.flush()
            os.fchmod(handle.fileno(), mode)
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dir_fd = os.open(target.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    return len(payload)
