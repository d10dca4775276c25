"""The distribution: the sdist and the wheel, a clean install, the registry entry, the binary.

Built once per test session (``python -m build``, then a fresh virtual
environment with only the wheel and its dependencies, then PyInstaller in
that environment), so what is checked is what a user installs.  These are
the slow tests (about two minutes together on an idle two-core machine):
``pytest -m "not slow"`` leaves them out while iterating; the full command
and CI run them.
"""

from __future__ import annotations

import email.parser
import hashlib
import json
import os
import re
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from registry_check import auth_check, icon_errors, sandbox_env

import acp_bridge

ROOT = Path(__file__).resolve().parent.parent
REGISTRY = ROOT / "registry"
AGENT_SCHEMA = Path(__file__).resolve().parent / "fixtures" / "registry" / "agent.schema.json"
NAME = "acp-bridge-agent"
VERSION = acp_bridge.__version__
PYPROJECT: dict[str, Any] = tomllib.loads((ROOT / "pyproject.toml").read_text())
BIN = "Scripts" if os.name == "nt" else "bin"


def run(command: Sequence[str | Path], **kw: Any) -> subprocess.CompletedProcess[str]:
    """Run ``command``; its output is in the assertion message if it fails."""
    result = subprocess.run(
        [str(c) for c in command], capture_output=True, text=True, timeout=900, **kw
    )
    assert result.returncode == 0, f"{command} failed:\n{result.stdout}\n{result.stderr}"
    return result


@dataclass(frozen=True)
class Built:
    sdist: Path
    wheel: Path


@dataclass(frozen=True)
class Installed:
    venv: Path

    def command(self, name: str) -> Path:
        return self.venv / BIN / name

    @property
    def python(self) -> Path:
        return self.command("python")


# The first test that needs the build, the install or the binary builds it in its own
# set-up (the binary: PyInstaller, minutes of CPU while other test processes run): a
# hang guard above that, never a speed limit.
pytestmark = pytest.mark.timeout(1200)


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    out = tmp_path_factory.mktemp("dist")
    # The sdist, then the wheel built from it, as a release would.
    run([sys.executable, "-m", "build", "--outdir", out, ROOT])
    (sdist,) = out.glob("*.tar.gz")
    (wheel,) = out.glob("*.whl")
    return Built(sdist, wheel)


@pytest.fixture(scope="session")
def installed(built: Built, tmp_path_factory: pytest.TempPathFactory) -> Installed:
    venv = tmp_path_factory.mktemp("venv")
    run([sys.executable, "-m", "venv", venv])
    done = Installed(venv)
    run([done.python, "-m", "pip", "install", "-q", "--disable-pip-version-check", built.wheel])
    return done


@pytest.fixture(scope="session")
def binary(installed: Installed, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The single-file executable, built by the documented command in the wheel's
    environment and unpacked from its archive."""
    out = tmp_path_factory.mktemp("binary")
    run(
        [
            installed.python,
            "-m",
            "pip",
            "install",
            "-q",
            "--disable-pip-version-check",
            "pyinstaller>=6.10",
        ]
    )
    script = ROOT / "packaging" / "build_binary.py"
    printed = run([installed.python, script, "--out", out / "dist", "--work", out / "work"])
    target = re.search(r'"([a-z]+-[a-z0-9_]+)": \{', printed.stdout)
    assert target is not None, printed.stdout
    archive = out / "dist" / f"{NAME}-{VERSION}-{target.group(1)}.tar.gz"
    digest = Path(f"{archive}.sha256").read_text().split()
    assert digest[1] == archive.name
    assert hashlib.sha256(archive.read_bytes()).hexdigest() == digest[0]
    unpacked = out / "unpacked"
    with tarfile.open(archive) as tar:
        assert tar.getnames() == [NAME]  # the executable alone, at the top
        tar.extractall(unpacked, filter="data")
    exe = unpacked / NAME
    assert os.access(exe, os.X_OK)
    return exe


def test_the_version_is_defined_once() -> None:
    project = PYPROJECT["project"]
    assert "version" not in project
    assert "version" in project["dynamic"]
    assert PYPROJECT["tool"]["setuptools"]["dynamic"]["version"] == {
        "attr": "acp_bridge.__version__"
    }
    assert f"## [{VERSION}]" in (ROOT / "CHANGELOG.md").read_text()


@pytest.mark.slow
def test_the_sdist_and_the_wheel_pass_twine_check(built: Built) -> None:
    run([sys.executable, "-m", "twine", "check", "--strict", built.sdist, built.wheel])
    assert built.wheel.name == f"acp_bridge_agent-{VERSION}-py3-none-any.whl"
    with tarfile.open(built.sdist) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    for needed in (
        "LICENSE",
        "README.md",
        "CHANGELOG.md",
        "pyproject.toml",
        "acp_bridge/schemas/script.schema.json",
    ):
        assert needed in names, needed
    with zipfile.ZipFile(built.wheel) as wheel:
        dist_info = f"acp_bridge_agent-{VERSION}.dist-info"
        metadata = email.parser.Parser().parsestr(wheel.read(f"{dist_info}/METADATA").decode())
        entry_points = wheel.read(f"{dist_info}/entry_points.txt").decode()
        files = set(wheel.namelist())
    assert metadata["Name"] == NAME
    assert metadata["Version"] == VERSION
    assert metadata["License-Expression"] == "Apache-2.0"
    assert metadata["Description-Content-Type"] == "text/markdown"
    assert "acp" in metadata["Keywords"].split(",")
    urls = dict(u.split(", ", 1) for u in metadata.get_all("Project-URL") or [])
    assert urls["Repository"] == json.loads((REGISTRY / "agent.json").read_text())["repository"]
    assert "Typing :: Typed" in (metadata.get_all("Classifier") or [])
    for script in ("acp-bridge = acp_bridge.cli:main", "acp-bridge-agent = acp_bridge.cli:main"):
        assert script in entry_points
    assert "acp_bridge/py.typed" in files
    assert "acp_bridge/schemas/event-log.schema.json" in files
    assert not any(n.startswith(("tests/", "bench/")) for n in files)


@pytest.mark.slow
def test_the_installed_wheel_passes_the_registry_check(
    installed: Installed, tmp_path: Path
) -> None:
    result = auth_check([str(installed.command(NAME))], tmp_path / "home", tmp_path)
    assert result["agentInfo"]["version"] == VERSION
    kinds = {m["id"]: m.get("type", "agent") for m in result["authMethods"]}
    # The _meta flag the registry sends is enough for the terminal method.
    assert kinds == {"api-key": "agent", "setup": "terminal"}


@pytest.mark.slow
def test_the_installed_commands(installed: Installed, tmp_path: Path) -> None:
    env = sandbox_env(tmp_path / "home")
    for name in (NAME, "acp-bridge"):
        version = run([installed.command(name), "--version"], env=env).stdout
        assert version.strip() == f"acp-bridge {VERSION}"
    # With no key anywhere, a session asks for auth and names the setup.
    frames = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "session/new",
            "params": {"cwd": str(tmp_path), "mcpServers": []},
        },
    ]
    stdin = "".join(json.dumps(f) + "\n" for f in frames)
    served = run([installed.command(NAME)], env=env, input=stdin)
    answers = [json.loads(line) for line in served.stdout.splitlines()]
    assert answers[1]["error"]["code"] == -32000
    assert "acp-bridge setup" in answers[1]["error"]["message"]
    # The demo runs from the wheel, with the default state directory.
    demo = run([installed.command("acp-bridge"), "demo"], env=env)
    assert "exactly the text you saw; interrupted: true" in demo.stdout


def test_the_registry_entry_is_valid_and_matches_the_package() -> None:
    entry = json.loads((REGISTRY / "agent.json").read_text())
    schema = json.loads(AGENT_SCHEMA.read_text())
    validator = jsonschema.Draft7Validator(schema, format_checker=jsonschema.FormatChecker())
    problems = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(entry)]
    assert not problems
    assert entry["id"] == NAME == PYPROJECT["project"]["name"]
    assert entry["version"] == VERSION
    assert entry["license"] == PYPROJECT["project"]["license"]
    assert entry["repository"] == PYPROJECT["project"]["urls"]["Repository"]
    assert entry["distribution"]["uvx"] == {"package": f"{NAME}=={VERSION}"}
    # The registry's build: a binary distribution needs all three systems.
    binary = entry["distribution"].get("binary")
    if binary is not None:
        assert {t.split("-")[0] for t in binary} >= {"darwin", "linux", "windows"}
        for target in binary.values():
            assert f"/v{VERSION}/" in target["archive"]


def test_the_registry_icon() -> None:
    assert icon_errors(REGISTRY / "icon.svg") == []


def test_the_icon_check_catches_what_the_registry_rejects(tmp_path: Path) -> None:
    icon = tmp_path / "icon.svg"
    good = (REGISTRY / "icon.svg").read_text()
    cases = {
        'stroke="#e67e22"': good.replace('stroke="currentColor"', 'stroke="#e67e22"'),
        "not 16x16": good.replace('width="16" height="16"', 'width="24" height="24"'),
        "not square": good.replace('height="16"', 'height="12"'),
        "style fill": good.replace("<path ", '<path style="fill: red" '),
    }
    for name, text in cases.items():
        icon.write_text(text)
        assert icon_errors(icon), name


def test_the_readme_starts_with_installing_it_by_name() -> None:
    readme = (ROOT / "README.md").read_text()
    head = readme[: readme.index("## The two commands")]
    for needed in (
        f"pip install {NAME}",
        f"pipx install {NAME}",
        f"uvx {NAME}",
        "Zed",
        "JetBrains",
        "acp-bridge setup",
    ):
        assert needed in head, needed
    # The from-source commands come after the install lines.
    assert readme.index(f"pip install {NAME}") < readme.index("pip install -q -e '.[test]'")
    # Until the first release the index has no such package: the install section says so
    # and gives the install from a clone, the same three ways.
    assert "Not on PyPI yet" in head
    for from_clone in ("git clone ", "pip install .", "pipx install .", f"uvx --from . {NAME}"):
        assert from_clone in head, from_clone


@pytest.mark.slow
def test_the_binary_starts_answers_initialize_and_runs_the_demo(
    binary: Path, tmp_path: Path
) -> None:
    env = sandbox_env(tmp_path / "home")
    assert run([binary, "--version"], env=env).stdout.strip() == f"acp-bridge {VERSION}"
    result = auth_check([str(binary)], tmp_path / "home", tmp_path)
    assert result["agentInfo"]["version"] == VERSION
    terminal = [m for m in result["authMethods"] if m.get("type") == "terminal"]
    # A single-file build runs its setup as itself.
    assert terminal[0]["_meta"]["terminal-auth"]["command"] == str(binary)
    demo = run([binary, "demo"], env=env)
    assert "■ Stopped" in demo.stdout
    assert "exactly the text you saw; interrupted: true" in demo.stdout
