"""The readers' open view of the event-log records, derived from the closed models.

`acp_bridge.log.records.models` defines every record type once, closed (the
schema is generated from it).  A reader that validates a log
(``acp-bridge history``, `acp_bridge.log.reader.validate_records`, the
compactions `acp_bridge.log.reopen` checks) must not refuse a log only
because a newer writer added to it, so this module derives from each closed
model an *open* one, by rules rather than by hand:

* every model, nested parts included, allows fields it does not list (a
  newer writer adds message ids, ACP fields, session metadata...), and they
  are kept as they are; ``Usage``'s extra counts are no longer typed;
* a closed vocabulary (a ``Literal``: stop reasons, outcomes, statuses,
  modes) reads as a plain non-empty string, ``Literal[1]`` as an integer and
  ``Literal[True]`` as a boolean, so a new value does not make an old reader
  refuse a log;
* a union of content blocks reads as one block whose ``type`` is required
  and whose other fields are optional, typed as in the blocks that have them:
  the derivation drops a block it cannot use (an unknown kind, a text block
  without its text), so such a block is not an error of the log;
* the rules across fields (a record's level, ``when`` rules, "leave it out
  rather than null", a resource's text or blob) are left to the checker
  (`acp_bridge.log.check`) and the schema: nulls read as absent.

Everything else is the closed model's: which fields are required (each has
been required since its record type was first written, so no older log of
format 1 lacks it), the strict types (an integer never accepts a string, a
float, a boolean, an array or an object; a number never a string or a
boolean), the bounds and the aliases.  So a record the closed models accept
is always read, and a wrong type that would mislead a reader is reported as
``file:line: field: reason``.  A record ``type`` with no model is not an
error: `model_for` returns ``None`` and the reader skips it with a warning.
The writer never uses these models (the hot path stays on plain dicts and
orjson); this module, with pydantic, is imported only by code that validates
a log.
"""

from __future__ import annotations

from functools import cache
from types import UnionType
from typing import Annotated, Any, Final, Literal, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, create_model
from pydantic.fields import FieldInfo

from .models import RECORDS, NonEmpty, RecordBase, record_type_of

__all__ = ["RECORD_MODELS", "Record", "model_for", "open_model"]


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True, frozen=True, defer_build=True)


def _open_type(hint: Any) -> Any:
    """``hint`` with its closed vocabularies and closed models opened (see the module)."""
    origin, args = get_origin(hint), get_args(hint)
    if origin is Annotated:
        return Annotated[(_open_type(args[0]), *hint.__metadata__)]
    if origin is Literal:
        if all(isinstance(value, bool) for value in args):
            return StrictBool
        if all(type(value) is int for value in args):
            return StrictInt
        if all(isinstance(value, str) and value for value in args):
            return NonEmpty
        raise TypeError(f"no open reading of {hint!r}")
    if origin in (Union, UnionType):
        if all(isinstance(arg, type) and issubclass(arg, BaseModel) for arg in args):
            if all("type" in arg.model_fields for arg in args):
                return _merged_blocks(args)
            raise TypeError(f"no open reading of {hint!r}: a union of models without a type")
        return Union[tuple(_open_type(arg) for arg in args)]  # noqa: UP007 (built at run time)
    if origin in (list, tuple, dict):
        return origin[tuple(_open_type(arg) for arg in args)]
    if isinstance(hint, type) and issubclass(hint, BaseModel):
        return open_model(hint)
    return hint


def _field_type(info: FieldInfo) -> Any:
    """A field's open type, with the constraints the field states (bounds, strictness)."""
    hint = _open_type(info.annotation)
    return Annotated[(hint, *info.metadata)] if info.metadata else hint


def _field(info: FieldInfo) -> tuple[Any, Any]:
    default = ... if info.is_required() else info.default
    return _field_type(info), Field(default, alias=info.alias)


@cache
def open_model(model: type[BaseModel]) -> type[BaseModel]:
    """The open counterpart of a closed model (its fields, opened; extra fields allowed)."""
    fields = {name: _field(info) for name, info in model.model_fields.items()}
    base = Record if issubclass(model, RecordBase) and model is not RecordBase else _Open
    return create_model(  # type: ignore[call-overload,no-any-return]
        model.__name__, __base__=base, __doc__=model.__doc__, __module__=__name__, **fields
    )


@cache
def _merged_blocks(members: tuple[type[BaseModel], ...]) -> type[BaseModel]:
    """One open block for a union of block models: a field every member requires
    stays required (``type``), the others are optional, typed as the members have them."""
    infos: dict[str, list[FieldInfo]] = {}
    for member in members:
        for name, info in member.model_fields.items():
            infos.setdefault(name, []).append(info)
    fields: dict[str, Any] = {}
    for name, found in infos.items():
        hint: Any = Union[tuple(_field_type(info) for info in found)]  # noqa: UP007
        if len(found) == len(members) and all(info.is_required() for info in found):
            fields[name] = (hint, ...)
        else:
            fields[name] = (hint | None, None)
    return create_model("Block", __base__=_Open, __module__=__name__, **fields)


Record: Final = open_model(RecordBase)
"""The open envelope every record has (``v`` is checked against the versions the reader knows)."""

RECORD_MODELS: Final[dict[str, type[BaseModel]]] = {
    name: open_model(model) for model in RECORDS for name in record_type_of(model)
}
"""The open model of each known record type (every type of `records.RECORD_TYPES` has one)."""


def model_for(record_type: str) -> type[BaseModel] | None:
    """The model of a record type, or ``None`` for a type this reader does not know."""
    return RECORD_MODELS.get(record_type)
