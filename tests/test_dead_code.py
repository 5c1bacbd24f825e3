"""No dead code: every module-level name of the package has a caller outside the tests.

vulture is not among the dependencies (and the lock is pinned), so this is the same
idea in a few lines of :mod:`ast`. A *definition* is a module-level function, class or
assigned name in ``tokenlens/``. A *use* is, anywhere in ``tokenlens/``, ``scripts/``
or ``benchmarks/``: a name read, an attribute, an imported name, or an identifier
inside a string that is not a docstring (``"tokenlens.replay.passes:greedy"`` is how
the engine worker is told what to call); ``pyproject.toml`` (entry points) and the
package's templates count too. The tests do not count: a function only a test calls
is dead code with a test.

Names are matched by their last component, not resolved per module: a name that one
module uses keeps a same-named unused one alive elsewhere. That errs towards keeping
code, never towards deleting a live name.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

# Names whose callers are outside what this test reads, each with the reason.
ALLOWED: dict[str, str] = {}


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the string constants that are docstrings."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.add(id(body[0].value))
    return out


def uses(tree: ast.AST) -> Counter[str]:
    found: Counter[str] = Counter()
    docs = _docstrings(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Store):
            found[node.id] += 1
        elif isinstance(node, ast.Attribute):
            found[node.attr] += 1
        elif isinstance(node, ast.alias):
            found[node.name.rsplit(".", 1)[-1]] += 1
        elif (
            isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs
        ):
            found.update(WORD.findall(node.value))
    return found


def definitions(tree: ast.Module) -> list[tuple[str, int]]:
    out = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            out.append((node.name, node.lineno))
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            out += [(t.id, node.lineno) for t in targets if isinstance(t, ast.Name)]
    return [(name, line) for name, line in out if not name.startswith("__")]


def unused() -> list[str]:
    used: Counter[str] = Counter()
    defined: list[tuple[str, Path, int]] = []
    for path in sorted((ROOT / "tokenlens").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        defined += [(name, path, line) for name, line in definitions(tree)]
        used += uses(tree)
    for folder in ("scripts", "benchmarks"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            used += uses(ast.parse(path.read_text(encoding="utf-8")))
    texts = [ROOT / "pyproject.toml"]
    texts += [p for p in (ROOT / "tokenlens").rglob("*") if p.suffix in {".html", ".j2", ".md"}]
    for path in texts:
        used.update(WORD.findall(path.read_text(encoding="utf-8")))
    return [
        f"{path.relative_to(ROOT)}:{line} {name}"
        for name, path, line in defined
        if not used[name] and name not in ALLOWED
    ]


def test_every_module_level_name_has_a_caller() -> None:
    assert unused() == []


def test_the_check_sees_what_it_should() -> None:
    tree = ast.parse('"""doc naming dead"""\nX = 1\ndef dead():\n    "dead"\nf = "m:live"\n')
    assert [n for n, _ in definitions(tree)] == ["X", "dead", "f"]
    found = uses(tree)
    assert found["live"] == 1 and found["dead"] == 0 and found["X"] == 0
