"""The argument models of the built-in tools (pydantic), loaded when a tool is first used.

A tool's model is its ``args_model``: the model sees its JSON Schema, and a
call's arguments are validated by it.  The tool classes
(`acp_bridge.tools.files`, `command`, `search`, `plan`, `ask_user`, `subagent`) name
their model with `acp_bridge.tools.base.LazyArgs`, so that a session starts
without pydantic: it is imported, and the models built, once the first
session is answered (`acp_bridge.warm`) or when a model is first needed.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, model_validator

__all__ = [
    "AskArgs",
    "CommandArgs",
    "EditArgs",
    "FindArgs",
    "PlanArgs",
    "PlanByIdArgs",
    "PlanEntry",
    "ReadArgs",
    "SearchArgs",
    "TaskArgs",
    "WriteArgs",
]


# -- read_file, write_file, edit_file (files.py) ---------------------------------


class ReadArgs(BaseModel):
    path: str = Field(
        description="Absolute path of the file (a relative one is taken from the cwd)"
    )
    line: int | None = Field(default=None, ge=1, description="First line to read (1-based)")
    limit: int | None = Field(default=None, ge=1, description="Most lines to read")


class WriteArgs(BaseModel):
    path: str = Field(description="Absolute path of the file to create or overwrite")
    content: str = Field(description="The whole new content of the file")


class EditArgs(BaseModel):
    path: str = Field(description="Absolute path of the file to edit")
    old_text: str = Field(description="Exact text to replace; it must occur exactly once")
    new_text: str = Field(description="The replacement text")


# -- run_command (command.py) ----------------------------------------------------


class CommandArgs(BaseModel):
    command: str = Field(description="Shell command line, run with /bin/sh -c")
    cwd: str | None = Field(
        default=None, description="Absolute working directory (default: the session's)"
    )
    timeout_s: float | None = Field(
        default=None, gt=0, description="Kill the command after this many seconds"
    )


# -- find_files, search_text (search.py) -----------------------------------------


class FindArgs(BaseModel):
    pattern: str = Field(
        description="Glob matched against paths relative to the directory, e.g. '**/*.py' or '*.md'"
    )
    path: str | None = Field(
        default=None, description="Directory to search (default: all the session's directories)"
    )


class SearchArgs(BaseModel):
    pattern: str = Field(
        description="Regular expression (RE2 syntax, like Python's without backreferences "
        "or lookaround) searched line by line"
    )
    path: str | None = Field(
        default=None,
        description="File or directory to search (default: all the session's directories)",
    )
    glob: str | None = Field(
        default=None, description="Only files whose name matches this glob, e.g. '*.py'"
    )


# -- update_plan (plan.py) -------------------------------------------------------


class PlanEntry(BaseModel):
    content: str = Field(min_length=1)
    status: Literal["pending", "in_progress", "completed"]
    priority: Literal["high", "medium", "low"] = "medium"


class PlanArgs(BaseModel):
    entries: list[PlanEntry]


class PlanByIdArgs(BaseModel):
    """``update_plan`` for an editor that keeps plans by id: several plans, each
    a list of steps or Markdown, and a plan removed (`acp_bridge.tools.plan`)."""

    plan_id: str = Field(
        default="main",
        min_length=1,
        description='Which plan: one id per plan you keep (default "main")',
    )
    entries: list[PlanEntry] | None = Field(
        default=None, description="The plan's steps: the whole list, each call"
    )
    markdown: str | None = Field(
        default=None, min_length=1, description="The plan as Markdown, instead of entries"
    )
    remove: bool = Field(
        default=False, description="Remove this plan (then give neither entries nor markdown)"
    )

    @model_validator(mode="after")
    def _one_form(self) -> PlanByIdArgs:
        given = (self.entries is not None) + (self.markdown is not None) + self.remove
        if given != 1:
            raise ValueError("give exactly one of entries, markdown or remove: true")
        return self


# -- ask_user (ask_user.py) ------------------------------------------------------


class AskArgs(BaseModel):
    question: str = Field(min_length=1, description="One clear question for the user")
    choices: list[str] | None = Field(
        default=None, description="Answers to pick from, if there are a few (optional)"
    )
    free_text: bool = Field(
        default=True,
        description="Whether the user may answer in their own words (default true; "
        "with no choices the answer is always free text)",
    )


# -- task (subagent.py) ----------------------------------------------------------


class TaskArgs(BaseModel):
    description: str = Field(description="A short title of the task (a few words)")
    prompt: str = Field(
        description="The whole task, self-contained: the subagent sees nothing else of this "
        "conversation"
    )
