"""No dead code: every name the package defines has a caller outside the tests.

Contract: a *definition* is a module-level function, class or assigned name, or a
method of a module-level class, in ``tokenlens/``. A *use* is, anywhere in
``tokenlens/``, ``scripts/`` or ``benchmarks/``: a name read, an attribute, or an
identifier inside a string that is neither a docstring nor an ``__all__`` entry;
``pyproject.toml`` (entry points) and the package's templates count too. An import, a
re-export or an ``__all__`` entry is not a use, and the tests do not count: a function
only a test calls is dead code with a test. :data:`ALLOWED` names the few definitions
whose callers are outside what this test reads (Python's import system, a stdlib base
class), each with the reason.

Names are matched by their last component, not resolved per module: a name that one
module uses keeps a same-named unused one alive elsewhere. That errs towards keeping
code, never towards deleting a live name. (vulture is not among the dependencies, and
the lock is pinned: this is the same idea in a few lines of :mod:`ast`.)
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path

from tests.support import docstring_ids

ROOT = Path(__file__).resolve().parents[1]
WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

# Names whose callers are outside what this test reads, each with the reason.
ALLOWED: dict[str, str] = {}


def _not_uses(tree: ast.AST) -> set[int]:
    """ids of the string constants that name nothing: docstrings and ``__all__`` entries."""
    out = docstring_ids(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
                out |= {id(c) for c in ast.walk(node.value) if isinstance(c, ast.Constant)}
    return out


def uses(tree: ast.AST) -> Counter[str]:
    found: Counter[str] = Counter()
    skip = _not_uses(tree)
    # `from m import A as B`: a read of B is a use of A
    renamed = {
        a.asname: a.name.rsplit(".", 1)[-1]
        for a in ast.walk(tree)
        if isinstance(a, ast.alias) and a.asname
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Store):
            found[node.id] += 1
            if node.id in renamed:
                found[renamed[node.id]] += 1
        elif isinstance(node, ast.Attribute) and not isinstance(node.ctx, ast.Store):
            found[node.attr] += 1
        elif (
            isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip
        ):
            found.update(WORD.findall(node.value))
    return found


def definitions(tree: ast.Module) -> list[tuple[str, int]]:
    out = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            out.append((node.name, node.lineno))
            if isinstance(node, ast.ClassDef):  # its methods, properties included
                out += [
                    (item.name, item.lineno)
                    for item in node.body
                    if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
                ]
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            out += [(t.id, node.lineno) for t in targets if isinstance(t, ast.Name)]
    return [(name, line) for name, line in out if not name.startswith("__")]


def unused(allowed: dict[str, str] = ALLOWED) -> list[str]:
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
        if not used[name] and name not in allowed
    ]


def test_every_module_level_name_has_a_caller() -> None:
    assert unused() == []


def test_every_allowed_name_is_still_needed() -> None:
    needed = {line.rsplit(" ", 1)[-1] for line in unused(allowed={})}
    assert sorted(set(ALLOWED) - needed) == []


def test_the_check_sees_what_it_should() -> None:
    source = (
        '"""doc naming dead"""\n'
        "from m import exported, renamed as alias\n"
        "__all__ = ['exported', 'dead']\n"
        "X = 1\n"
        "def dead():\n"
        "    'dead'\n"
        "class C:\n"
        "    def method(self):\n"
        "        return alias\n"
        "f = 'm:live'\n"
    )
    tree = ast.parse(source)
    assert [n for n, _ in definitions(tree)] == ["X", "dead", "C", "method", "f"]
    found = uses(tree)
    assert found["live"] == 1 and found["renamed"] == 1
    # never a use: a docstring, an __all__ entry, an import, a definition
    assert found["dead"] == found["exported"] == found["X"] == found["method"] == 0
