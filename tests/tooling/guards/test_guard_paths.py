from __future__ import annotations

import os
from pathlib import Path

import pytest

from node.errors import ConfigError, GuardError, ToolError
from node.tooling.guards import Workspace, atomic_write


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "sub").mkdir(parents=True)
    (root / "a.txt").write_text("a")
    (root / "sub" / "b.txt").write_text("b")
    (tmp_path / "secret.txt").write_text("secret")
    return root


def test_relative_path_joins_the_root(ws: Path) -> None:
    assert Workspace(ws).resolve_read("sub/b.txt") == (ws / "sub" / "b.txt").resolve()


def test_absolute_path_inside_the_root_is_allowed(ws: Path) -> None:
    assert Workspace(ws).resolve_read(ws / "a.txt") == (ws / "a.txt").resolve()


def test_dotdot_that_stays_inside_is_allowed(ws: Path) -> None:
    assert Workspace(ws).resolve_read("sub/../a.txt") == (ws / "a.txt").resolve()


@pytest.mark.parametrize("path", ["../secret.txt", "a/../../secret.txt", "sub/../../secret.txt"])
def test_traversal_is_refused(ws: Path, path: str) -> None:
    with pytest.raises(GuardError, match="outside"):
        Workspace(ws).resolve_read(path)
    with pytest.raises(GuardError, match="outside"):
        Workspace(ws).resolve_write(path)


def test_absolute_path_outside_is_refused(ws: Path) -> None:
    with pytest.raises(GuardError, match="outside"):
        Workspace(ws).resolve_read("/etc/passwd")


@pytest.mark.parametrize("path", ["", "  ", "a\x00.txt"])
def test_empty_and_nul_paths_are_refused(ws: Path, path: str) -> None:
    with pytest.raises(GuardError):
        Workspace(ws).resolve_read(path)


def test_message_names_the_given_path_but_not_the_root(ws: Path) -> None:
    with pytest.raises(GuardError) as info:
        Workspace(ws).resolve_read("../secret.txt")
    assert "../secret.txt" in str(info.value)
    assert str(ws) not in str(info.value)
    assert str(ws) not in repr(Workspace(ws))


def test_missing_file_is_a_tool_error_without_the_root(ws: Path) -> None:
    with pytest.raises(ToolError, match="does not exist") as info:
        Workspace(ws).resolve_read("nope.txt")
    assert not isinstance(info.value, GuardError)
    assert str(ws) not in str(info.value)


def test_symlink_pointing_outside_is_refused(ws: Path) -> None:
    (ws / "escape").symlink_to(ws.parent / "secret.txt")
    (ws / "escape_dir").symlink_to(ws.parent)
    workspace = Workspace(ws)
    for path in ("escape", "escape_dir/secret.txt"):
        with pytest.raises(GuardError, match="outside"):
            workspace.resolve_read(path)


def test_dangling_symlink_pointing_outside_cannot_be_written(ws: Path) -> None:
    (ws / "planted").symlink_to(ws.parent / "new.txt")
    with pytest.raises(GuardError, match="outside"):
        Workspace(ws).resolve_write("planted")


def test_symlink_pointing_inside_is_fine(ws: Path) -> None:
    (ws / "link").symlink_to(ws / "sub" / "b.txt")
    assert Workspace(ws).resolve_read("link") == (ws / "sub" / "b.txt").resolve()


def test_symlinked_root_is_resolved(ws: Path, tmp_path: Path) -> None:
    (tmp_path / "alias").symlink_to(ws)
    workspace = Workspace(tmp_path / "alias")
    assert workspace.resolve_read("a.txt") == (ws / "a.txt").resolve()
    assert workspace.resolve_read(tmp_path / "alias" / "a.txt") == (ws / "a.txt").resolve()


def test_prefix_sibling_is_not_inside(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws2").mkdir()
    (tmp_path / "ws2" / "x.txt").write_text("x")
    workspace = Workspace(tmp_path / "ws")
    with pytest.raises(GuardError, match="outside"):
        workspace.resolve_read(tmp_path / "ws2" / "x.txt")
    with pytest.raises(GuardError, match="outside"):
        workspace.resolve_read("../ws2/x.txt")


def test_separate_read_and_write_roots(tmp_path: Path) -> None:
    data, out = tmp_path / "data", tmp_path / "out"
    data.mkdir()
    out.mkdir()
    (data / "in.txt").write_text("in")
    workspace = Workspace(data, writable=False, write_roots=[out])
    assert workspace.resolve_read("in.txt") == (data / "in.txt").resolve()
    assert workspace.resolve_write(out / "r.txt") == (out / "r.txt").resolve()
    assert workspace.resolve_read(out) == out.resolve()  # write roots are readable
    with pytest.raises(GuardError, match="writable"):
        workspace.resolve_write("in.txt")


def test_extra_read_root_is_not_writable(tmp_path: Path) -> None:
    ws, ref = tmp_path / "ws", tmp_path / "ref"
    ws.mkdir()
    ref.mkdir()
    (ref / "doc.txt").write_text("doc")
    workspace = Workspace(ws, read_roots=[ref])
    assert workspace.resolve_read(ref / "doc.txt").read_text() == "doc"
    with pytest.raises(GuardError, match="writable"):
        workspace.resolve_write(ref / "doc.txt")


def test_read_only_workspace_refuses_every_write(ws: Path) -> None:
    with pytest.raises(GuardError, match="read-only"):
        Workspace(ws, writable=False).resolve_write("new.txt")


def test_root_itself_is_not_a_write_target(ws: Path) -> None:
    with pytest.raises(GuardError, match="root"):
        Workspace(ws).resolve_write(".")


def test_relative_shows_paths_without_the_root(ws: Path) -> None:
    workspace = Workspace(ws)
    assert workspace.relative(workspace.resolve_read("sub/b.txt")) == "sub/b.txt"
    assert workspace.relative(workspace.resolve_read(".")) == "."


def test_missing_root_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        Workspace(tmp_path / "missing")
    (tmp_path / "file").write_text("")
    with pytest.raises(ConfigError):
        Workspace(tmp_path / "file")


def test_atomic_write_creates_and_replaces(tmp_path: Path) -> None:
    target = tmp_path / "f.txt"
    assert atomic_write(target, "héllo") == len("héllo".encode())
    assert target.read_text() == "héllo"
    target.chmod(0o600)
    atomic_write(target, b"\x00bytes")
    assert target.read_bytes() == b"\x00bytes"
    assert target.stat().st_mode & 0o777 == 0o600
    assert os.listdir(tmp_path) == ["f.txt"]  # no temp file left behind


def test_atomic_write_leaves_nothing_on_failure(tmp_path: Path) -> None:
    (tmp_path / "dir").mkdir()
    with pytest.raises(IsADirectoryError):
        atomic_write(tmp_path / "dir", "x")
    assert os.listdir(tmp_path) == ["dir"]
