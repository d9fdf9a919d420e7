"""Cached virtual environments for other A2A implementations (a2a-sdk 0.3, framework clients).

    python = cached_venv(["a2a-sdk[http-server]<0.4", "uvicorn"])   # that venv's python
    python = legacy_python()                               # the same, for LEGACY_REQUIREMENTS

Each environment is made once per machine under ``$A2A_NODE_VENV_CACHE`` (default
``~/.cache/a2a-node/venvs``) in a folder named after its requirements (and this interpreter's
version), from the package index pip is configured with. Two processes that ask at once are safe: a
file lock serialises the build and a marker file written last says it is complete, so a build that
died half-way is redone. An unreachable index (or any failed install) raises :class:`VenvError`
with pip's last lines.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import venv
from collections.abc import Sequence
from pathlib import Path

LEGACY_REQUIREMENTS = ("a2a-sdk[http-server]<0.4", "uvicorn")
INSTALL_TIMEOUT_S = 900.0
_COMPLETE = ".a2a-node-complete"


class VenvError(RuntimeError):
    """A cached environment could not be made (most often: the package index is unreachable)."""


def cache_root() -> Path:
    configured = os.environ.get("A2A_NODE_VENV_CACHE")
    return Path(configured) if configured else Path.home() / ".cache" / "a2a-node" / "venvs"


def venv_dir(requirements: Sequence[str], name: str = "") -> Path:
    """Where the environment for ``requirements`` lives (whether made yet or not)."""
    python = f"py{sys.version_info.major}{sys.version_info.minor}"
    key = hashlib.sha256("\n".join([python, *sorted(requirements)]).encode()).hexdigest()[:12]
    label = name or requirements[0].split("[")[0].split("<")[0].split(">")[0].split("=")[0]
    return cache_root() / f"{label}-{python}-{key}"


def python_of(path: Path) -> Path:
    return path / "bin" / "python"


def cached_venv(
    requirements: Sequence[str], name: str = "", *, timeout: float = INSTALL_TIMEOUT_S
) -> Path:
    """The python of a venv with ``requirements`` installed, made now if it is not cached.

    ``timeout`` bounds the install (seconds); a framework with a large dependency tree needs more.
    """
    if not requirements:
        raise ValueError("cached_venv needs at least one requirement")
    path = venv_dir(requirements, name)
    if (path / _COMPLETE).exists():
        return python_of(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(f"{path}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, or the process dies
        if not (path / _COMPLETE).exists():
            _build(path, requirements, timeout)
    return python_of(path)


def legacy_python() -> Path:
    """The python of the a2a-sdk 0.3 environment (:data:`LEGACY_REQUIREMENTS`)."""
    return cached_venv(LEGACY_REQUIREMENTS, "a2a-sdk-0.3")


def _build(path: Path, requirements: Sequence[str], timeout: float) -> None:
    shutil.rmtree(path, ignore_errors=True)  # a build that died half-way
    venv.EnvBuilder(with_pip=True, clear=True).create(path)
    command = [str(python_of(path)), "-m", "pip", "install", "--quiet", *requirements]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as exc:
        raise VenvError(
            f"installing {list(requirements)} took over {timeout:.0f} s "
            "(a slow or unreachable package index, or a large dependency tree)"
        ) from exc
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
        raise VenvError(
            f"could not install {list(requirements)} into {path}: is the package index "
            f"reachable (pip's configured index, proxy)? pip said:\n{tail}"
        )
    (path / _COMPLETE).write_text("\n".join(requirements) + "\n")
