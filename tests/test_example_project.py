"""The example project (``examples/notes-agent``) passes its tests in a clean virtual
environment that has only this package and its ``testing`` extra: the kit works from
an installed wheel (plugin entry point, bundled files), with nothing of this
repository's test setup.  CI runs it (``pytest -q`` selects every marker)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.harness import EXAMPLES, ROOT, nested_pytest_env

PROJECT = EXAMPLES / "notes-agent"
IGNORE = shutil.ignore_patterns("__pycache__", ".pytest_cache", "*.egg-info", ".venv")


def copy_source(dest: Path) -> Path:
    """What building the package needs (symlinks resolved, as in a source archive)."""
    dest.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, dest / name)
    shutil.copytree(ROOT / "acp_bridge", dest / "acp_bridge", symlinks=False, ignore=IGNORE)
    return dest


@pytest.mark.slow
def test_the_example_project_passes_in_a_clean_venv(tmp_path: Path) -> None:
    source = copy_source(tmp_path / "source")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = str(venv / "bin" / "python")
    install = subprocess.run(
        [python, "-m", "pip", "install", "-q", f"{source}[testing]"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert install.returncode == 0, install.stdout + install.stderr
    # Only the package and the testing extra: none of the repository's test tools.
    for absent in ("acp", "hypothesis", "pytest_timeout"):
        probe = subprocess.run([python, "-c", f"import {absent}"], capture_output=True, timeout=60)
        assert probe.returncode != 0, f"{absent} is installed in the clean venv"
    project = tmp_path / "notes-agent"
    shutil.copytree(PROJECT, project, ignore=IGNORE)
    done = subprocess.run(
        [python, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=project,
        env=nested_pytest_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "4 passed" in done.stdout
    assert "1 snapshot passed" in done.stdout
    # The installed checker finds its bundled schema and checks the example agent.
    checked = subprocess.run(
        [
            str(venv / "bin" / "acp-bridge"),
            "check",
            "--only",
            "stop.cancelled",
            "--only",
            "stdout.valid",
            "--watch",
            "0.2",
            "--scripted",
            "--",
            python,
            str(project / "notes_agent.py"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "PASS          stdout.valid" in checked.stdout
