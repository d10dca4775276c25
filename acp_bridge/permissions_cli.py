"""``acp-bridge permissions``: the "always" answers kept per project.

    acp-bridge permissions                    list every project's rules
    acp-bridge permissions --forget TOOL      forget TOOL's rules (in every project,
                                              or with --project DIR in that one)
    acp-bridge permissions --reset            forget every rule

What a session's own log remembers is not changed: a loaded session keeps
the answers it was given (see `acp_bridge.tools.rules_store`).
"""

from __future__ import annotations

import sys

from .tools import rules_store

__all__ = ["run_permissions"]

SHOWN = {"allow_always": "allow", "reject_always": "reject"}


def run_permissions(
    state_dir: str, *, forget: str | None = None, project: str | None = None, reset: bool = False
) -> int:
    out = sys.stdout
    if reset:
        had = rules_store.reset(state_dir)
        out.write(
            "Forgot every remembered permission.\n" if had else "No remembered permissions.\n"
        )
        return 0
    if forget is not None:
        dropped = rules_store.forget(state_dir, forget, project)
        if not dropped:
            where = f" in {project}" if project else ""
            sys.stderr.write(f"acp-bridge: no remembered permission for {forget}{where}\n")
            return 1
        out.write(f"Forgot {forget} in {dropped} project{'s' if dropped != 1 else ''}.\n")
        return 0
    projects = rules_store.load_all(state_dir)
    if project is not None:
        key = rules_store.project_of(project)
        projects = {key: projects[key]} if key in projects else {}
    if not projects:
        out.write("No remembered permissions.\n")
        return 0
    for name in sorted(projects):
        out.write(f"{name}\n")
        for tool, decision in sorted(projects[name].items()):
            out.write(f"  {SHOWN.get(decision, decision):<7} {tool}\n")
    return 0
