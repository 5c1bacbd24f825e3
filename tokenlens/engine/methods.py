"""The speculative methods: what tokenlens knows of each, and what the installed vLLM accepts.

Contract:

- :data:`METHODS` is the one table of the methods tokenlens knows: per method its
  drafter family (``trained`` | ``training_free`` | ``none``), whether vLLM needs a
  separate drafter model (``model``), the speculative options tokenlens sets unless
  given, the stand-in models ``doctor`` resolves it on, and the replay pass that
  reproduces it. Every layer above reads it; none keeps a list of its own.
- :func:`family_of` gives a method's family, from the table or from a declaration
  (``analyze --method-family NAME=FAMILY``), and refuses a method it does not know in
  one line that says how to declare it: never a silent default.
- :func:`speculative_names` reads the methods and ``SpeculativeConfig`` fields the
  installed vLLM accepts from its sources (no import: importing vLLM's config takes half
  a minute here), or None when it cannot; ``trace`` and ``bench`` accept any of them,
  known to the table or not, and record it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from tokenlens.errors import TokenlensError

# Drafter families. Trained drafters learned from data (H2 asks whether they lack
# Japanese); training-free ones learned nothing (the analysis's control family, the
# speed model's zero draft cost); ``none`` is no speculation at all.
TRAINED, FREE, NO_DRAFTER = "trained", "training_free", "none"
# The passes that replay a method from one greedy trace (tokenlens.replay).
DRAFTER_PASS, NGRAM_PASS = "drafter", "ngram"
# Where a method's family may be declared when the table does not know it (docs/analysis.md).
DECLARE_HINT = "--method-family {method}=trained (or training_free)"


@dataclass(frozen=True)
class Method:
    """One row of :data:`METHODS`: a speculative method as vLLM names it."""

    name: str
    family: str
    # vLLM needs a separate drafter model (``speculative_config.model``).
    drafter_model: bool = False
    # speculative_config keys tokenlens sets unless the user gives them.
    defaults: Mapping[str, Any] = field(default_factory=dict)
    # doctor: (target, drafter) among tokenlens.models.tiny's configs to resolve vLLM's
    # decisions for this method on (config files only); None: not resolved.
    stand_in: tuple[str, str | None] | None = None
    # replay: the pass that reproduces it (DRAFTER_PASS | NGRAM_PASS); None: not replayed.
    replay: str | None = None


_NGRAM_DEFAULTS = MappingProxyType({"prompt_lookup_max": 4, "prompt_lookup_min": 1})

METHODS: Mapping[str, Method] = MappingProxyType(
    {
        m.name: m
        for m in (
            Method("mtp", TRAINED, stand_in=("tiny-mimo-mtp", None)),
            Method(
                "dflash", TRAINED, drafter_model=True, stand_in=("tiny-qwen3", "tiny-qwen3-dflash")
            ),
            Method(
                "draft_model",
                TRAINED,
                drafter_model=True,
                stand_in=("tiny-qwen3", "tiny-qwen3"),
                replay=DRAFTER_PASS,
            ),
            Method("eagle", TRAINED, drafter_model=True),
            Method("eagle3", TRAINED, drafter_model=True),
            Method("medusa", TRAINED, drafter_model=True),
            Method("mlp_speculator", TRAINED, drafter_model=True),
            Method(
                "ngram",
                FREE,
                defaults=_NGRAM_DEFAULTS,
                stand_in=("tiny-qwen3", None),
                replay=NGRAM_PASS,
            ),
            Method("ngram_gpu", FREE),
            Method("suffix", FREE),
            Method("none", NO_DRAFTER),
        )
    }
)
"""Every method tokenlens knows, trained first. A method vLLM adds is one row here."""

METHODS_WITH_DRAFT_MODEL = frozenset(m.name for m in METHODS.values() if m.drafter_model)
STAND_IN_METHODS = tuple(m.name for m in METHODS.values() if m.stand_in is not None)
REPLAYABLE = tuple(m.name for m in METHODS.values() if m.replay is not None)


def family_of(method: str, declared: Mapping[str, str] | None = None) -> str:
    """The drafter family of ``method``: the table's, else the declared one.

    Raises :class:`~tokenlens.errors.TokenlensError` (one line, naming the method and
    how to declare it) for a method neither knows: an unknown method is never taken
    for a trained drafter, nor for any other family.
    """
    row = METHODS.get(method)
    if row is not None:
        return row.family
    family = (declared or {}).get(method)
    if family is None:
        raise TokenlensError(
            f"method {method!r} is not in tokenlens's method table, so its drafter family "
            f"is unknown: declare it with {DECLARE_HINT.format(method=method)}"
        )
    return family


def parse_declarations(items: Iterable[str]) -> dict[str, str]:
    """``["my_drafter=trained", ...]`` -> ``{"my_drafter": "trained"}``, checked.

    A declaration may not contradict the table (the table's family wins nowhere
    silently: a declared ``ngram=trained`` is refused).
    """
    out: dict[str, str] = {}
    for item in items:
        method, sep, family = (part.strip() for part in item.partition("="))
        if not sep or not method:
            raise TokenlensError(f"--method-family expects METHOD=FAMILY, got {item!r}")
        if family not in (TRAINED, FREE):
            raise TokenlensError(
                f"--method-family {item}: the family is trained or training_free, not {family!r}"
            )
        known = METHODS.get(method)
        if known is not None and known.family != family:
            raise TokenlensError(
                f"--method-family {item}: tokenlens's method table says {method} is {known.family}"
            )
        out[method] = family
    return out


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
    """The names of the vLLM under ``root`` (default: the installed one), without importing it.

    Read with :mod:`ast` from ``vllm/config/speculative.py``: the ``SpeculativeMethod``
    Literal (with the Literals it nests) and the fields of ``SpeculativeConfig``. None
    when vLLM or that file is missing or its shape changed: the caller then leaves the
    check to vLLM (which refuses an unknown method only once its engine is being built).
    """
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
