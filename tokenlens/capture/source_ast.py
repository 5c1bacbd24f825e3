"""Reading the structure of vLLM's code with ``ast``, for the capture hook's surface check.

The helpers :mod:`tokenlens.capture.surface` uses to find the classes, methods, fields
and spec-decode block the hook relies on, and :func:`dump`, the form of a syntax tree
that does not depend on the Python reading it (what fingerprints hash). No vLLM import.
"""

from __future__ import annotations

import ast
import hashlib


def dump(node: ast.AST) -> str:
    """The structure of ``node`` in a form that does not depend on the Python reading it.

    ``ast.dump`` does: Python 3.12 adds ``type_params=[]`` to every function and class,
    3.13 leaves empty fields out, so the same vLLM sources gave three fingerprints under
    3.11, 3.12 and 3.13 (a verified release read as ``untested`` on a 3.12 GPU host).
    Empty fields (None, ``[]``) are left out here, whichever Python parsed the source;
    a constant's ``None`` is a value, not an absence, and stays.
    """
    return _canonical(node)


def _meaningful_none(node: ast.AST, field: str) -> bool:
    return isinstance(node, ast.Constant) and field == "value"


def _canonical(value: object) -> str:
    if isinstance(value, ast.AST):
        fields = ", ".join(
            f"{name}={_canonical(field)}"
            for name, field in ast.iter_fields(value)
            if field != [] and (field is not None or _meaningful_none(value, name))
        )
        return f"{type(value).__name__}({fields})"
    if isinstance(value, list):
        return "[" + ", ".join(_canonical(item) for item in value) + "]"
    return repr(value)


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def find_class(tree: ast.Module, name: str) -> ast.ClassDef | None:
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return node
    return None


def find_method(cls: ast.ClassDef | None, name: str) -> ast.FunctionDef | None:
    if cls is None:
        return None
    for node in cls.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    return None


def params(fn: ast.FunctionDef) -> tuple[str, ...]:
    args = fn.args
    return tuple(a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs])


def class_fields(cls: ast.ClassDef | None) -> set[str]:
    """Annotated class-level names (dataclass fields)."""
    if cls is None:
        return set()
    return {
        n.target.id
        for n in cls.body
        if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)
    }


def self_assigned(fn: ast.FunctionDef | None) -> set[str]:
    """Attributes ``self.X`` assigned in a method (``__init__``)."""
    if fn is None:
        return set()
    out = set()
    for node in ast.walk(fn):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, ast.AnnAssign):
            targets = [node.target]
        for t in targets:
            if (
                isinstance(t, ast.Attribute)
                and isinstance(t.value, ast.Name)
                and t.value.id == "self"
            ):
                out.add(t.attr)
    return out


def stats_calls(fn: ast.AST) -> list[ast.Call]:
    """Calls ``<x>.make_spec_decoding_stats(...)`` inside ``fn``."""
    return [
        n
        for n in ast.walk(fn)
        if isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and n.func.attr == "make_spec_decoding_stats"
    ]


def calls_super(fn: ast.AST, name: str) -> bool:
    """Whether ``fn`` calls ``super().<name>(...)``."""
    for n in ast.walk(fn):
        if (
            isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute)
            and n.func.attr == name
            and isinstance(n.func.value, ast.Call)
            and isinstance(n.func.value.func, ast.Name)
            and n.func.value.func.id == "super"
        ):
            return True
    return False


def spec_block(fn: ast.FunctionDef) -> list[ast.stmt]:
    """The statements of ``update_from_output`` that decide what vLLM counts.

    The statement (inside the per-request loop) that calls ``make_spec_decoding_stats``,
    preceded by the loop's assignments of the names it reads (the sampled tokens and
    the scheduled drafts). Comments and line numbers do not enter the hash.
    """
    for loop in ast.walk(fn):
        if not isinstance(loop, ast.For):
            continue
        for i, stmt in enumerate(loop.body):
            if not stats_calls(stmt):
                continue
            read = {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name)}
            feeding = [
                s
                for s in loop.body[:i]
                if isinstance(s, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id in read for t in s.targets)
            ]
            return [*feeding, stmt]
    return []


def attrs_read(fn: ast.AST) -> set[str]:
    return {n.attr for n in ast.walk(fn) if isinstance(n, ast.Attribute)}
