"""Typed access to a plan's TOML tables: every error names the table and the key."""

from __future__ import annotations

import re
from typing import Any

from tokenlens.errors import TokenlensError

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


class Table:
    """Typed access to one TOML table; every error names the table and the key."""

    def __init__(self, where: str, data: Any, known: set[str]) -> None:
        if not isinstance(data, dict):
            raise TokenlensError(f"{where} must be a table")
        unknown = sorted(set(data) - known)
        if unknown:
            raise TokenlensError(
                f"{where}: unknown key {unknown[0]!r} (known: {', '.join(sorted(known))})"
            )
        self.where = where
        self.data = data

    def fail(self, key: str, message: str) -> TokenlensError:
        return TokenlensError(f"{self.where}.{key}: {message}")

    def get(self, key: str, kind: type | tuple[type, ...], default: Any = None) -> Any:
        if key not in self.data:
            return default
        value = self.data[key]
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if isinstance(value, bool) and bool not in kinds:
            raise self.fail(key, f"expected {kind_name(kinds)}, got a boolean")
        if not isinstance(value, kinds):
            raise self.fail(key, f"expected {kind_name(kinds)}, got {type(value).__name__}")
        return value

    def require(self, key: str, kind: type | tuple[type, ...]) -> Any:
        if key not in self.data:
            raise self.fail(key, "missing (required)")
        return self.get(key, kind)

    def name(self, key: str = "name") -> str:
        value: str = self.require(key, str)
        if not NAME.match(value):
            raise self.fail(key, f"{value!r} must be letters, digits, '.', '_' or '-'")
        return value

    def positive(self, key: str, default: int, minimum: int = 1) -> int:
        value: int = self.get(key, int, default)
        if value < minimum:
            raise self.fail(key, f"must be at least {minimum}, got {value}")
        return value

    def strings(self, key: str, default: tuple[str, ...] | None) -> tuple[str, ...] | None:
        value = self.get(key, list, None)
        if value is None:
            return default
        if not value or not all(isinstance(v, str) and v for v in value):
            raise self.fail(key, "expected a non-empty list of strings")
        return tuple(value)

    def table(self, key: str) -> dict[str, Any]:
        value: dict[str, Any] = self.get(key, dict, {})
        return dict(value)


def where_of(kind: str, i: int, data: Any) -> str:
    """``[[method]] 'ngram'`` when the entry has a usable name, else ``[[method]] #2``."""
    name = data.get("name") if isinstance(data, dict) else None
    if isinstance(name, str) and NAME.match(name):
        return f"[[{kind}]] {name!r}"
    return f"[[{kind}]] #{i + 1}"


def kind_name(kinds: tuple[type, ...]) -> str:
    names = {bool: "a boolean", int: "an integer", float: "a number", str: "a string"}
    names |= {list: "a list", dict: "a table"}
    return " or ".join(names.get(k, k.__name__) for k in kinds)


def unique(where: str, names: list[str]) -> None:
    seen: set[str] = set()
    for n in names:
        if n in seen:
            raise TokenlensError(f"{where}: name {n!r} is used twice")
        seen.add(n)
