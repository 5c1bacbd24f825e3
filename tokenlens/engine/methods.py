"""The speculative methods and options the installed vLLM accepts, read from its sources.

``trace`` checks ``--method`` and ``--spec-option`` keys with these before anything
starts: vLLM itself refuses an unknown method only once its engine is being built (39 s
here), and importing vLLM's config modules to ask (what ``bench --check`` does, in
:mod:`tokenlens.bench.vllm_check`) takes half a minute on this machine. The names come
from the same definitions, read with :mod:`ast`: the ``SpeculativeMethod`` Literal
(with the Literals it nests) and the fields of ``SpeculativeConfig`` in
``vllm/config/speculative.py``. None when vLLM or that file is not there or its shape
changed: the caller then leaves the check to vLLM.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

SPECULATIVE_SOURCE = "vllm/config/speculative.py"


@dataclass(frozen=True)
class SpeculativeNames:
    """vLLM's speculative method names and ``SpeculativeConfig`` field names."""

    methods: frozenset[str]
    options: frozenset[str]


def _assignments(tree: ast.Module) -> dict[str, ast.expr]:
    out: dict[str, ast.expr] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name):
                out[target.id] = node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value:
            out[node.target.id] = node.value
    return out


def _literal_strings(expr: ast.expr, names: dict[str, ast.expr], seen: set[str]) -> set[str]:
    """Every string a (possibly nested) ``Literal[...]`` alias allows."""
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
        return {expr.value}
    if isinstance(expr, ast.Name):
        if expr.id in seen or expr.id not in names:
            return set()
        return _literal_strings(names[expr.id], names, seen | {expr.id})
    if isinstance(expr, ast.Subscript):
        head = expr.value
        head_name = head.id if isinstance(head, ast.Name) else getattr(head, "attr", "")
        if head_name != "Literal":
            return set()
        items = expr.slice.elts if isinstance(expr.slice, ast.Tuple) else [expr.slice]
        found: set[str] = set()
        for item in items:
            found |= _literal_strings(item, names, seen)
        return found
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.BitOr):
        return _literal_strings(expr.left, names, seen) | _literal_strings(expr.right, names, seen)
    return set()


def _config_fields(tree: ast.Module) -> set[str]:
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "SpeculativeConfig":
            return {
                item.target.id
                for item in node.body
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
            }
    return set()


def speculative_names(root: Path | None = None) -> SpeculativeNames | None:
    """The names of the vLLM under ``root`` (default: the installed one), without importing it."""
    if root is None:
        from tokenlens.engine.vllm_source import installed_root

        root = installed_root()
        if root is None:
            return None
    try:
        tree = ast.parse((root / SPECULATIVE_SOURCE).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return None
    names = _assignments(tree)
    methods = _literal_strings(names.get("SpeculativeMethod", ast.Constant(None)), names, set())
    options = _config_fields(tree)
    if not methods or not options:
        return None  # the definitions moved: leave the check to vLLM
    return SpeculativeNames(frozenset(methods), frozenset(options))
