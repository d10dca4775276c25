"""The report of `acp-bridge check`: text for a terminal, JSON for a file.

Every result says what was checked, the spec sentence it comes from and what
was found; a failure also shows the wire frames at fault (``>``) with a few
before them for context, long runs of chunks elided.  The JSON report holds
every transcript whole.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterator
from typing import IO, Any

from .. import __version__
from .requirements import Tier
from .results import Evidence, Outcome, Process, Result
from .runner import Report

Json = dict[str, Any]

CONTEXT = 3  # frames shown before each frame at fault
MAX_LINES = 40  # frames shown per evidence
FRAME_CHARS = 220


def frame_text(direction: str, msg: Json) -> str:
    arrow = {"send": "->", "send-raw": "->", "recv": "<-"}.get(direction, "--")
    if direction == "send-raw":
        body = "(raw) " + json.dumps(msg.get("bytes", ""))
    elif direction == "close":
        body = "(stdin closed)"
    else:
        body = json.dumps(msg, separators=(",", ":"), ensure_ascii=False)
    if len(body) > FRAME_CHARS:
        body = body[: FRAME_CHARS - 3] + "..."
    return f"{arrow} {body}"


def evidence_lines(evidence: Evidence) -> list[str]:
    """The frames of an evidence: each mark with `CONTEXT` frames before it (without
    marks: the last frames), at most `MAX_LINES`."""
    process = evidence.process
    total = len(process.transcript)
    marks = set(evidence.marks)
    if marks:
        shown = sorted({j for m in marks for j in range(max(0, m - CONTEXT), m + 1) if j < total})
    else:
        shown = list(range(max(0, total - 2 * CONTEXT), total))
    lines = [f"wire of {process.name} ({shlex.join(process.command)[:160]}):"]
    previous = -1
    for j in shown:
        if len(lines) > MAX_LINES:
            lines.append(f"      ... (the whole wire of {process.name} is in the --json report)")
            break
        if previous >= 0 and j != previous + 1:
            lines.append(f"      ... {j - previous - 1} frame(s)")
        previous = j
        at = process.times_ms[j] if j < len(process.times_ms) else 0.0
        pointer = ">" if j in marks else " "
        lines.append(f"  {pointer} #{j:<4} {at:>8.1f} ms  {frame_text(*process.transcript[j])}")
    if process.stderr_tail:
        lines.append("  stderr (last lines): " + process.stderr_tail.replace("\n", " | ")[:400])
    return lines


def result_lines(result: Result, *, show_wire: bool) -> list[str]:
    req = result.requirement
    label = result.outcome.value.upper()  # PASS, NOT EXERCISED
    lines = [f"  {label:<13} {req.id:<26} {req.title}"]
    pad = " " * 16
    lines.append(f"{pad}requires: {req.requirement}")
    for quote in req.quotes:
        lines.append(f'{pad}spec ({quote.source}): "{quote.text}"')
    lines.append(f"{pad}found: {result.detail}")
    if result.figures:
        figures = ", ".join(f"{k}={v:g}" for k, v in result.figures.items())
        lines.append(f"{pad}figures: {figures}")
    if show_wire and result.outcome in (Outcome.FAIL, Outcome.NOT_EXERCISED):
        for evidence in result.evidence:
            lines += [pad + line for line in evidence_lines(evidence)]
    return lines


def _capabilities(info: Json | None) -> str:
    caps = (info or {}).get("agentCapabilities") or {}
    names = []
    v2_session = ((info or {}).get("capabilities") or {}).get("session")
    if isinstance(v2_session, dict):
        names.append("session")
        names += [f"session {key}" for key, value in v2_session.items() if value]
    if caps.get("loadSession") is True:
        names.append("loadSession")
    for key, value in (caps.get("sessionCapabilities") or {}).items():
        if isinstance(value, dict):
            names.append(f"session {key}")
    for key, value in (caps.get("promptCapabilities") or {}).items():
        if value is True:
            names.append(f"prompt {key}")
    return ", ".join(names) or "none"


def render_text(report: Report) -> str:
    """The report for a terminal."""
    options = report.options
    agent = report.agent_info or {}
    info = agent.get("agentInfo") or agent.get("info") or {}  # v1, v2
    lines = [
        f"acp-bridge check {__version__}: ACP v{options.protocol} conformance of "
        f"{shlex.join(options.command)}" + (" (scripted provider)" if options.scripted else ""),
        f"agent: {info.get('name', '?')} {info.get('version', '')}".rstrip()
        + f"; advertises: {_capabilities(report.agent_info)}",
        f"schema: {report.schema_source}; every frame both ways",
    ]
    if report.checker_frame_problems:
        lines.append(
            f"WARNING: {len(report.checker_frame_problems)} of the checker's own frames are "
            "invalid (a bug of the checker): " + "; ".join(report.checker_frame_problems[:3])
        )
    else:
        lines.append(f"the checker's own {report.checker_frames} frames are valid")
    for tier in Tier:
        results = [r for r in report.results if r.requirement.tier is tier]
        if not results:
            continue
        lines += ["", tier.value.upper()]
        for result in results:
            lines += result_lines(result, show_wire=True)
    left = [p for p in report.processes if p.survivors]
    if left:
        lines += ["", "LEFT RUNNING (ended by the checker: SIGTERM, then SIGKILL)"]
        for process in left:
            lines.append(f"  {process.name}: " + ", ".join(process.survivors))
    lines += ["", *stop_lines(report.stop)]
    counts = {o: sum(r.outcome is o for r in report.results) for o in Outcome}
    summary = ", ".join(f"{n} {o.value}" for o, n in counts.items() if n)
    blocking = [r.requirement.id for r in report.results if r.blocking]
    verdict = "CONFORMANT" if not blocking else "NOT CONFORMANT: " + ", ".join(blocking)
    lines += ["", f"{summary} in {report.seconds:.1f} s: {verdict}"]
    return "\n".join(lines) + "\n"


def _wire(process: Process) -> Iterator[Json]:
    for i, ((d, m), t) in enumerate(zip(process.transcript, process.times_ms, strict=False)):
        yield {"i": i, "ms": round(t, 1), "direction": d, "message": m}


def stop_lines(stop: Json) -> list[str]:
    """The ``"stop"`` figures for a terminal."""
    if not stop:
        return []
    lines = [f"STOP: {stop['stops']} Stops measured ({stop['unanswered']} never answered)"]
    ms = stop.get("stop_to_response_ms")
    if ms:
        lines.append("  Stop to response: " + ", ".join(f"{k} {v:g} ms" for k, v in ms.items()))
    chunks = stop.get("chunks_after_cancel")
    if chunks:
        lines.append(f"  chunks after the cancel: p50 {chunks['p50']:g}, p99 {chunks['p99']:g}")
    leaks = stop["updates_after_response"]
    leaking = sum(1 for n in leaks["per_stop"] if n)
    lines.append(
        f"  updates after the response (cancel leaks): {leaks['total']}, "
        f"in {leaking} of the {len(leaks['per_stop'])} Stops"
    )
    disconnect = stop.get("disconnect") or {}
    lines.append("  disconnect mid-stream: " + ", ".join(f"{k} {v}" for k, v in disconnect.items()))
    return lines


def _process_json(process: Process, *, wire: bool = True) -> Json:
    out: Json = {
        "scenario": process.scenario,
        "index": process.index,
        "command": process.command,
        "returncode": process.returncode,
        "frames": len(process.transcript),
        "not_json_rpc": [line.decode("utf-8", "replace") for line in process.bad_lines],
        "not_json_rpc_count": max(process.bad_line_count, len(process.bad_lines)),
        "stderr_tail": process.stderr_tail,
        "survivors": process.survivors,
    }
    if wire:
        out["wire"] = list(_wire(process))
    return out


def _result_json(result: Result, numbers: dict[int, int]) -> Json:
    req = result.requirement
    return {
        "id": req.id,
        "tier": req.tier.value,
        "title": req.title,
        "requirement": req.requirement,
        "spec": [{"source": q.source, "text": q.text} for q in req.quotes],
        "applies_if": req.applies_if,
        "outcome": result.outcome.value,
        "blocking": result.blocking,
        "detail": result.detail,
        "figures": result.figures,
        "evidence": [
            {"process": numbers[id(e.process)], "frames": e.marks} for e in result.evidence
        ],
    }


def render_json(report: Report, *, wires: bool = True) -> Json:
    """The report as JSON data: every result, and every process with its whole wire
    (without ``wires``, the processes without their ``"wire"``: `write_json` streams
    them from disk)."""
    numbers = {id(p): i for i, p in enumerate(report.processes)}
    options = report.options
    return {
        "checker": {"name": "acp-bridge check", "version": __version__},
        "schema": report.schema_source,
        "agent": {
            "command": options.command,
            "scripted": options.scripted,
            "initialize": report.agent_info,
        },
        "options": {
            "protocol": options.protocol,
            "stream_prompt": options.stream_prompt,
            "permission_prompt": options.permission_prompt,
            "stop_after": options.stop_after,
            "timeout": options.timeout,
            "stream_timeout": options.stream_timeout,
            "stop_timeout": options.stop_timeout,
            "watch": options.watch,
            "exit_timeout": options.exit_timeout,
            "stops": options.stops,
        },
        "exit_code": report.exit_code,
        "seconds": round(report.seconds, 2),
        "checker_frames": report.checker_frames,
        "checker_frame_problems": report.checker_frame_problems,
        "stop": report.stop,
        "results": [_result_json(r, numbers) for r in report.results],
        "processes": [_process_json(p, wire=wires) for p in report.processes],
    }


def write_json(report: Report, out: IO[str]) -> None:
    """Write `render_json`'s report to ``out`` with each process's wire read from disk
    frame by frame: the whole wire of a fast agent is never in memory at once."""
    data = render_json(report, wires=False)
    processes = data.pop("processes")
    head = json.dumps(data, indent=2)
    out.write(head[: head.rindex("}")].rstrip() + ',\n  "processes": [')
    for n, (process, entry) in enumerate(zip(report.processes, processes, strict=True)):
        body = json.dumps(entry, indent=2)
        out.write(("," if n else "") + "\n" + body[: body.rindex("}")].rstrip())
        out.write(',\n  "wire": [')
        for i, frame in enumerate(_wire(process)):
            out.write(("," if i else "") + "\n    " + json.dumps(frame, ensure_ascii=False))
        out.write("\n  ]\n}")
    out.write("\n  ]\n}\n")


__all__ = ["evidence_lines", "render_json", "render_text", "write_json"]
