"""The cached venvs: made once even when two processes ask at once; a failed install says why."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.interop.legacy_sdk import VenvError, cached_venv, venv_dir

ROOT = Path(__file__).resolve().parents[2]
ASK = (
    "import sys; sys.path.insert(0, {root!r}); "
    "from tests.interop.legacy_sdk import cached_venv; print(cached_venv(['pip'], 'race'))"
)


def test_two_processes_asking_at_once_get_one_complete_venv(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = {**os.environ, "A2A_NODE_VENV_CACHE": str(tmp_path)}
    code = ASK.format(root=str(ROOT))
    racers = [
        subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    paths = {racer.communicate(timeout=300)[0].strip() for racer in racers}
    assert [racer.returncode for racer in racers] == [0, 0]
    (python,) = paths  # the same venv for both
    done = subprocess.run([python, "-c", "import sys; print(sys.prefix)"], capture_output=True)
    assert done.returncode == 0
    monkeypatch.setenv("A2A_NODE_VENV_CACHE", str(tmp_path))
    made = venv_dir(["pip"], "race")
    assert (made / ".a2a-node-complete").read_text() == "pip\n"
    assert [p.name for p in tmp_path.iterdir() if p.is_dir()] == [made.name]


def test_a_failed_install_raises_with_pips_reason_and_is_not_marked_complete(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("A2A_NODE_VENV_CACHE", str(tmp_path))
    wanted = ["a2a-node-test-no-such-distribution==0.0.1"]
    with pytest.raises(VenvError, match=r"could not install .*no-such-distribution") as raised:
        cached_venv(wanted, "missing")
    assert "pip said" in str(raised.value)
    assert not (venv_dir(wanted, "missing") / ".a2a-node-complete").exists()
