"""summary.json's schema machinery: a record is read and written by its declared fields.

:func:`read` builds a record from a JSON object, each field from the key of its name
(``renamed`` for another key) by the reader its annotation names; a wrong type reads as
missing (None, an empty dict or tuple), a value is kept as read, and a value that is
already the record is taken as it is. :meth:`Parsed.to_json` writes a record back, field
by field in declared order (a field with :data:`OMITTED` metadata is left out when
None, one with :data:`OUTSIDE` never); :func:`json_value` writes any value holding
records.
So declaring a field is all a new key needs; only fields kept elsewhere in the file
are read by hand and passed to :func:`read` by name. Only the standard library.
"""

from __future__ import annotations

import dataclasses
import numbers
from collections.abc import Callable, Mapping
from typing import Any, Self, TypeVar

T = TypeVar("T")
Reader = Callable[[Any], Any]

# --- scalar readers: a wrong type reads as missing ------------------------------------------


def as_map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def as_float(value: Any) -> float | None:
    """A number as it was read (int or float, NaN kept: the views print it as missing)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None
    number: float = value
    return number


def as_int(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        return None
    number: int = value
    return number


def as_str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def as_bool(value: Any) -> bool | None:
    # numpy's bool_ too: the analysis hands its in-memory dict to the same reader
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        return bool(value)
    return None


def as_strs(data: Any) -> tuple[str, ...]:
    return tuple(str(x) for x in data) if isinstance(data, list) else ()


def as_configs(data: Any) -> tuple[tuple[str, int], ...]:
    """``[[method, k], ...]`` as pairs (entries of another shape left out)."""
    out = []
    for item in data if isinstance(data, list) else []:
        if isinstance(item, list) and len(item) == 2 and as_int(item[1]) is not None:
            out.append((str(item[0]), int(item[1])))
    return tuple(out)


def as_ints(data: Any) -> tuple[int, ...]:
    return tuple(int(k) for k in data if as_int(k) is not None) if isinstance(data, list) else ()


def as_floats(data: Any) -> tuple[float, ...]:
    """A list of numbers as they were read (entries that are not numbers left out)."""
    if not isinstance(data, list):
        return ()
    return tuple(x for x in data if as_float(x) is not None)


def as_counts(data: Any) -> dict[str, int]:
    """``{key: int}``, entries that are not integers left out."""
    return {str(k): v for k, v in as_map(data).items() if as_int(v) is not None}


_SCALARS: dict[str, Reader] = {
    "float | None": as_float,
    "int | None": as_int,
    "str | None": as_str,
    "bool | None": as_bool,
    "tuple[str, ...]": as_strs,
    "tuple[int, ...]": as_ints,
    "tuple[float, ...]": as_floats,
    "tuple[tuple[str, int], ...]": as_configs,
    "dict[str, int]": as_counts,
    "dict[str, int | None]": lambda d: {str(k): as_int(v) for k, v in as_map(d).items()},
    "dict[str, float | None]": lambda d: {str(k): as_float(v) for k, v in as_map(d).items()},
    "tuple[int, ...] | None": lambda d: as_ints(d) if isinstance(d, list) else None,
    "tuple[str, ...] | None": lambda d: as_strs(d) if isinstance(d, list) else None,
    "dict[str, str] | None": lambda d: (
        {str(k): v for k, v in d.items() if isinstance(v, str)} if isinstance(d, Mapping) else None
    ),
    "dict[str, int | None] | None": lambda d: (
        {str(k): as_int(v) for k, v in d.items()} if isinstance(d, Mapping) else None
    ),
    "dict[str, float | None] | None": lambda d: (
        {str(k): as_float(v) for k, v in d.items()} if isinstance(d, Mapping) else None
    ),
    "dict[str, str]": lambda d: {str(k): v for k, v in as_map(d).items() if isinstance(v, str)},
    # a block kept as written (no reader looks inside)
    "dict[str, Any] | None": lambda d: dict(d) if isinstance(d, Mapping) else None,
}

# --- the generic reader ---------------------------------------------------------------------

_PARSED: dict[str, Any] = {}  # class name -> class (Figure or Section)


class Parsed:
    """A dataclass read from a JSON object by :func:`read` and written back by
    :meth:`to_json`; its name can stand in another's annotation (``Rate | None``,
    ``dict[str, Rate]``, ``tuple[Rate, ...]``), which then reads it with its ``parse``."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _PARSED[cls.__name__] = cls

    def to_json(self) -> dict[str, Any]:
        """This record as summary.json holds it: every field at its key, in field order,
        None as null (a field declared with :data:`OMITTED` left out instead); the
        inverse of :func:`read` for a record whose fields all live at their own key (one
        with fields read by hand writes itself)."""
        return {
            f.metadata.get("key", f.name): json_value(value)
            for f in dataclasses.fields(self)  # type: ignore[arg-type]
            if f.init
            and not f.metadata.get("outside")
            and not ((value := getattr(self, f.name)) is None and f.metadata.get("omitted"))
        }


def json_value(value: Any) -> Any:
    """``value`` as summary.json holds it: records by their ``to_json``, tuples and lists
    as lists, mappings key by key (order kept); anything else as it is. What the analysis
    writes goes through here, so a record is written by the type that reads it."""
    if isinstance(value, Parsed):
        return value.to_json()
    if isinstance(value, tuple | list):
        return [json_value(v) for v in value]
    if isinstance(value, Mapping):
        return {k: json_value(v) for k, v in value.items()}
    return value


class Figure(Parsed):
    """A figure with its interval, or a block that may be missing: None when the
    object is missing or empty."""

    @classmethod
    def parse(cls, data: Any) -> Self | None:
        if isinstance(data, cls):  # built already (the analysis' own blocks)
            return data
        if not isinstance(data, Mapping) or not data:
            return None
        return read(cls, data)


class Section(Parsed):
    """A section that is always there (empty when the file lacks it)."""

    @classmethod
    def parse(cls, data: Any) -> Self:
        return data if isinstance(data, cls) else read(cls, data)


def _reader(annotation: str) -> Reader:
    """The reader of a field declared as ``annotation`` (the annotation's text)."""
    if annotation in _SCALARS:
        return _SCALARS[annotation]
    name = annotation.removesuffix(" | None")
    if name in _PARSED:
        parse: Reader = _PARSED[name].parse
        return parse
    if annotation.startswith("dict[str, ") and annotation.endswith("]"):
        inner = _reader(annotation[len("dict[str, ") : -1])
        # entries that do not read (a Figure that is not there) are left out
        return lambda d: {
            str(k): value for k, v in as_map(d).items() if (value := inner(v)) is not None
        }
    if annotation.startswith("tuple[") and annotation.endswith(", ...]"):
        item = _reader(annotation[len("tuple[") : -len(", ...]")])
        return lambda d: tuple(item(x) for x in d) if isinstance(d, list) else ()
    raise TypeError(f"no reader for a summary field of type {annotation}")


def read(cls: type[T], data: Any, **given: Any) -> T:
    """``cls`` from the JSON object ``data``: ``given`` fields as they are, every other
    field read from its key with the reader of its annotation."""
    d = as_map(data)
    values = dict(given)
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        if f.name not in values and f.init and not f.metadata.get("outside"):
            values[f.name] = _reader(str(f.type))(d.get(f.metadata.get("key", f.name)))
    return cls(**values)


def typed(cls: type[T], block: Mapping[str, Any] | None, **given: Any) -> T | None:
    """``block`` as the record ``cls`` (None for None), by summary.json's one schema.

    Raises :class:`TypeError` when the record would not write ``block`` back as it is:
    a key the analysis writes that the record does not declare, or declares otherwise,
    is caught here, never silently dropped from summary.json."""
    if block is None:
        return None
    record: T = read(cls, block, **given) if given else cls.parse(block)  # type: ignore[attr-defined]
    written, built = json_value(record), json_value(block)
    if written != built:
        keys = sorted(k for k in {*written, *built} if written.get(k) != built.get(k))
        raise TypeError(
            f"summary.json: {cls.__name__} does not declare what the analysis wrote "
            f"(keys {', '.join(map(str, keys))})"
        )
    return record


def renamed(key: str) -> Any:
    """A field (default None) read from ``key`` rather than its own name (``class``)."""
    return dataclasses.field(default=None, metadata={"key": key})


OMITTED: Mapping[str, Any] = {"omitted": True}
"""Metadata of a field whose key the file has only when it has a value (declared
``field(default=None, metadata=OMITTED)``): None is written by leaving the key out, not
as null."""

OUTSIDE: Mapping[str, Any] = {"outside": True}
"""Metadata of a field kept outside the record's object in the file (a section's name,
which is its key in the enclosing map): neither read nor written by the schema; the
enclosing reader passes it to :func:`read`."""
