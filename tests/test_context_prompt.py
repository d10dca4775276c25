"""The system prompt, the instruction files, the context window and the context settings (units).

The default system prompt is snapshotted in full (`snapshots/test_context_prompt/`)
for a fixed environment; the subprocess tests in test_context_providers.py check
what a real request carries.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from support.harness import SessionSnapshot
from syrupy.assertion import SnapshotAssertion

from acp_bridge.context.config import ContextConfig, Price, context_config
from acp_bridge.context.instructions import (
    FILE_LIMIT,
    TOTAL_LIMIT,
    Instructions,
    find_instructions,
    read_instructions,
)
from acp_bridge.context.system_prompt import PromptEnvironment, system_prompt
from acp_bridge.context.windows import DEFAULT_WINDOW, resolve_window
from acp_bridge.paths import config_dir
from acp_bridge.providers.config import ConfigError
from acp_bridge.providers.models import window_of_entry
from acp_bridge.providers.notes import INTERRUPTED_NOTE
from acp_bridge.tools.registry import TOOLS


@pytest.fixture
def snapshot(snapshot: SnapshotAssertion) -> SnapshotAssertion:
    return snapshot.use_extension(SessionSnapshot)


ENV = PromptEnvironment(
    cwd="/home/ada/project",
    additional_directories=("/home/ada/shared-lib",),
    os_name="Linux 6.8.0",
    shell="/bin/bash",
    today="2026-12-01",
    tools=tuple((tool.name, tool.description) for tool in TOOLS),
    instructions=(
        Instructions(
            "/home/ada/.config/acp-bridge/AGENTS.md", "Answer in British English.\n", user=True
        ),
        Instructions("/home/ada/project/AGENTS.md", "Run `make test` before you say done.\n"),
    ),
)


def test_the_default_system_prompt(snapshot: SnapshotAssertion) -> None:
    prompt = system_prompt(ContextConfig(), ENV)
    for fact in ("/home/ada/project", "/home/ada/shared-lib", "Linux 6.8.0", "/bin/bash"):
        assert fact in prompt
    assert "2026-12-01" in prompt
    assert INTERRUPTED_NOTE in prompt  # what the note after a Stop means
    assert all(f"- {tool.name}: " in prompt for tool in TOOLS)
    assert "permission" in prompt
    # The instruction files come last, the user's first, each under its path.
    assert prompt.index("British English") < prompt.index("make test")
    assert "## /home/ada/project/AGENTS.md (the project's instructions)" in prompt
    assert {"prompt": prompt.splitlines()} == snapshot


def test_system_file_appends_or_replaces() -> None:
    appended = system_prompt(ContextConfig(system="Always be brief.\n"), ENV)
    assert appended.startswith("You are acp-bridge")
    assert "Always be brief." in appended
    assert appended.index("Always be brief.") < appended.index("make test")
    replaced = system_prompt(ContextConfig(system="Always be brief.\n", system_mode="replace"), ENV)
    assert replaced.startswith("Always be brief.")
    assert "You are acp-bridge" not in replaced
    assert "make test" in replaced  # the project's instructions stay


def test_a_session_without_tools_is_told_so() -> None:
    prompt = system_prompt(ContextConfig(), PromptEnvironment(cwd="/p"))
    assert "You have no tools in this session" in prompt


def test_a_cut_instruction_file_says_so() -> None:
    env = PromptEnvironment(
        cwd="/p", instructions=(Instructions("/p/AGENTS.md", "x" * 10, 99_999),)
    )
    assert "the file has 99,999 bytes and only the first 10 are included" in system_prompt(
        ContextConfig(), env
    )


# -- finding and reading the instruction files --------------------------------------------


def _tree(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "AGENTS.md").write_text("root rules")
    (repo / "CLAUDE.md").write_text("not read: AGENTS.md is there")
    (repo / "pkg" / "sub").mkdir(parents=True)
    (repo / "pkg" / "CLAUDE.md").write_text("pkg rules")
    return repo


def test_instruction_files_from_the_repository_root_down_to_the_cwd(tmp_path: Path) -> None:
    repo = _tree(tmp_path)
    config = tmp_path / "config"
    config.mkdir()
    (config / "AGENTS.md").write_text("my own rules")
    found = find_instructions(str(repo / "pkg" / "sub"), str(config))
    assert found == [
        (str(config / "AGENTS.md"), True),
        (str(repo / "AGENTS.md"), False),
        (str(repo / "pkg" / "CLAUDE.md"), False),
    ]
    texts = [item.text for item in read_instructions(str(repo / "pkg" / "sub"), str(config))]
    assert texts == ["my own rules", "root rules", "pkg rules"]


def test_outside_a_repository_only_the_cwd_is_read(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("above: not read")
    cwd = tmp_path / "work"
    cwd.mkdir()
    (cwd / "AGENTS.md").write_text("here")
    found = find_instructions(str(cwd), str(tmp_path / "no-config"))
    assert found == [(str(cwd / "AGENTS.md"), False)]


def test_instruction_files_are_bounded(tmp_path: Path) -> None:
    repo = _tree(tmp_path)
    (repo / "AGENTS.md").write_text("é" * FILE_LIMIT)  # two bytes each: cut mid-way
    (repo / "pkg" / "CLAUDE.md").write_text("p" * FILE_LIMIT * 3)
    [root, pkg] = read_instructions(str(repo / "pkg"), str(tmp_path / "none"))
    assert root.cut_from == 2 * FILE_LIMIT
    assert root.text == "é" * (FILE_LIMIT // 2)
    assert pkg.cut_from == 3 * FILE_LIMIT
    assert len((root.text + pkg.text).encode()) <= TOTAL_LIMIT


def test_a_fifo_named_agents_md_is_skipped(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "AGENTS.md")
    assert read_instructions(str(tmp_path), str(tmp_path / "none")) == []


def test_the_config_directory(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("ACP_BRIDGE_CONFIG_DIR", str(tmp_path / "c"))
    assert config_dir() == str(tmp_path / "c")
    monkeypatch.delenv("ACP_BRIDGE_CONFIG_DIR")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "x"))
    assert config_dir() == str(tmp_path / "x" / "acp-bridge")


# -- the context window and the settings ----------------------------------------------------


def test_the_window_of_a_model() -> None:
    config = ContextConfig(context_windows={"qwen3:8b": 8192})
    assert resolve_window("qwen3:8b", config) == (8192, "config")
    assert resolve_window("qwen3:8b", ContextConfig()) == (40_960, "known")
    assert resolve_window("claude-haiku-9", ContextConfig()) == (200_000, "known")
    assert resolve_window("local", ContextConfig(), reported=16_384) == (16_384, "server")
    assert resolve_window("gpt-4o", ContextConfig(), reported=64_000) == (64_000, "server")
    assert resolve_window("local", ContextConfig()) == (DEFAULT_WINDOW, "default")
    flag = ContextConfig(context_window=1000, context_windows={"qwen3:8b": 8192})
    assert resolve_window("qwen3:8b", flag, reported=5) == (1000, "flag")


def test_a_models_listing_entry() -> None:
    assert window_of_entry({"id": "m", "max_model_len": 8192}) == 8192
    assert window_of_entry({"id": "m", "context_length": 131_072}) == 131_072
    assert window_of_entry({"id": "m", "meta": {"n_ctx": 4096}}) == 4096
    assert window_of_entry({"id": "m", "context_length": "big"}) is None
    assert window_of_entry({"id": "m"}) is None


def test_context_settings_are_checked(tmp_path: Path) -> None:
    system = tmp_path / "system.md"
    system.write_text("Be brief.")
    config = context_config(
        {
            "system": str(system),
            "system_mode": "replace",
            "compact_threshold": 0.5,
            "context_windows": {"m": 1000},
            "prices": {"m": {"input": 3, "output": 15.0}},
        },
        context_window=None,
    )
    assert config.system == "Be brief."
    assert config.system_mode == "replace"
    assert config.compact_threshold == 0.5
    assert config.prices["m"] == Price(3.0, 15.0, "USD")
    assert config.prices["m"].of(1_000_000, 100_000) == pytest.approx(4.5)
    for settings, words in (
        ({"system": str(tmp_path / "missing.md")}, "cannot read the system prompt file"),
        ({"system_mode": "prepend"}, "system_mode must be"),
        ({"compact_threshold": 2}, "compact_threshold must be from 0.1 to 1.0"),
        ({"context_windows": {"m": 0}}, "context_windows.m"),
        ({"prices": {"m": {"input": -1, "output": 1}}}, "prices.m.input"),
        ({"prices": {"m": {"input": 1, "output": 1, "cache": 1}}}, "prices.m must be"),
    ):
        with pytest.raises(ConfigError, match=words):
            context_config(settings)
