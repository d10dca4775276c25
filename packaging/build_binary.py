"""Build the single-file ``acp-bridge-agent`` executable for this machine's platform.

    python3 -m venv build/binary-venv
    build/binary-venv/bin/pip install . pyinstaller
    build/binary-venv/bin/python packaging/build_binary.py
    # -> dist/acp-bridge-agent-VERSION-PLATFORM.tar.gz and its .sha256

Run it with the Python of a clean virtual environment that holds the package
and PyInstaller only: PyInstaller bundles what the environment's imports
reach (a development environment would add mypy, numpy and more).  The
interpreter, acp_bridge as installed there and its dependencies go into one
executable, which is packed at the top of a ``.tar.gz``
(a ``.zip`` on Windows) beside a ``.sha256`` file, and the entry for
``distribution.binary`` of ``registry/agent.json`` is printed.  PyInstaller
builds only for the platform it runs on: each of the registry's six targets
is built on a machine of its own (see docs/distribution.md).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NAME = "acp-bridge-agent"
# (platform.system(), platform.machine()) -> the registry's target names.
TARGETS = {
    ("Linux", "x86_64"): "linux-x86_64",
    ("Linux", "aarch64"): "linux-aarch64",
    ("Darwin", "x86_64"): "darwin-x86_64",
    ("Darwin", "arm64"): "darwin-aarch64",
    ("Windows", "AMD64"): "windows-x86_64",
    ("Windows", "ARM64"): "windows-aarch64",
}


def target() -> str:
    key = (platform.system(), platform.machine())
    if key not in TARGETS:
        raise SystemExit(f"no registry target for {key[0]} {key[1]}")
    return TARGETS[key]


def version() -> str:
    """The version of the acp_bridge that PyInstaller will bundle (the installed one)."""
    import acp_bridge

    return acp_bridge.__version__


def build(out: Path, work: Path) -> Path:
    """Run PyInstaller; the path of the executable."""
    import acp_bridge

    schemas = Path(acp_bridge.__file__).parent / "schemas"
    command = [
        sys.executable,
        "-m",
        "PyInstaller",
        "--onefile",
        "--noconfirm",
        "--clean",
        "--log-level=WARN",
        f"--name={NAME}",
        # Modules imported by name at run time (the tools, the lazy exports).
        "--collect-submodules=acp_bridge",
        f"--add-data={schemas}{os.pathsep}acp_bridge/schemas",
        f"--distpath={out}",
        f"--workpath={work}",
        f"--specpath={work}",
        str(ROOT / "packaging" / "binary_entry.py"),
    ]
    subprocess.run(command, check=True, cwd=work)
    exe = out / (NAME + (".exe" if os.name == "nt" else ""))
    if not exe.is_file():
        raise SystemExit(f"PyInstaller made no {exe}")
    return exe


def pack(exe: Path, out: Path, stem: str) -> Path:
    """The archive of ``exe`` alone, at its top level, and its ``.sha256`` beside it."""
    if os.name == "nt":
        archive = out / f"{stem}.zip"
        with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as z:
            z.write(exe, exe.name)
    else:
        archive = out / f"{stem}.tar.gz"

        def owned_by_nobody(info: tarfile.TarInfo) -> tarfile.TarInfo:
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mode = 0o755
            return info

        with tarfile.open(archive, "w:gz") as tar:
            tar.add(exe, exe.name, filter=owned_by_nobody)
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    Path(f"{archive}.sha256").write_text(f"{digest}  {archive.name}\n")
    return archive


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "dist", help="default: dist/")
    parser.add_argument(
        "--work",
        type=Path,
        default=ROOT / "build" / "binary",
        help="PyInstaller's scratch folder (default: build/binary/)",
    )
    parser.add_argument(
        "--repository",
        default="https://github.com/acp-bridge/acp-bridge-agent",
        help="where the release archives are downloaded from",
    )
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    args.work.mkdir(parents=True, exist_ok=True)
    ver, tgt = version(), target()
    exe = build(args.out, args.work)
    archive = pack(exe, args.out, f"{NAME}-{ver}-{tgt}")
    shutil.rmtree(args.work, ignore_errors=True)
    entry = {
        tgt: {
            "archive": f"{args.repository}/releases/download/v{ver}/{archive.name}",
            "cmd": f"./{exe.name}",
        }
    }
    print(f"built {archive} ({archive.stat().st_size // 1024} KiB)")
    print(Path(f"{archive}.sha256").read_text().strip())
    print("distribution.binary entry for registry/agent.json:")
    print(json.dumps(entry, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
