"""The outcome of each check, with the wire evidence behind it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from .requirements import Requirement, Tier

Json = dict[str, Any]


class Outcome(StrEnum):
    PASS = "pass"
    FAIL = "fail"
    SKIP = "skip"
    """The check does not apply: the capability is not advertised, or the
    behaviour has no stimulus (no --permission-prompt)."""
    NOT_EXERCISED = "not exercised"
    """The checker tried and the behaviour did not happen (the prompt did not
    stream): a mandatory check that is not exercised is not passed."""


@dataclass
class Process:
    """One agent process the checker started, and its whole wire transcript
    (on disk during a run: `acp_bridge.check.spool`)."""

    scenario: str
    index: int
    command: list[str]
    transcript: Sequence[tuple[str, Json]] = field(default_factory=list)
    times_ms: Sequence[float] = field(default_factory=list)
    bad_lines: list[bytes] = field(default_factory=list)
    bad_line_count: int = 0
    """How many lines were not JSON-RPC (``bad_lines`` keeps the first few)."""
    returncode: int | None = None
    stderr_tail: str = ""
    survivors: list[str] = field(default_factory=list)
    """Processes of the agent's group still running when the checker ended it."""

    @property
    def name(self) -> str:
        return f"{self.scenario} #{self.index}"


@dataclass
class Evidence:
    """Frames of one process that show a result: ``marks`` are transcript indices."""

    process: Process
    marks: list[int] = field(default_factory=list)


@dataclass
class Result:
    requirement: Requirement
    outcome: Outcome
    detail: str
    evidence: list[Evidence] = field(default_factory=list)
    figures: dict[str, float | int] = field(default_factory=dict)

    @property
    def blocking(self) -> bool:
        """Whether this result makes the agent not conformant (a non-zero exit)."""
        tier = self.requirement.tier
        if self.outcome is Outcome.FAIL:
            return tier in (Tier.MANDATORY, Tier.CAPABILITY)
        return self.outcome is Outcome.NOT_EXERCISED and tier is Tier.MANDATORY


__all__ = ["Evidence", "Outcome", "Process", "Result"]
