"""The package's layers, as docs/architecture.md draws them, checked on the code's imports.

Every ``import`` of a ``tokenlens`` module is read with :mod:`ast`, including imports
inside functions and under ``if TYPE_CHECKING:``: a lazy import is still a dependency
(it is what must be importable, and what a reader must know, for that code to run), so
it obeys the same order. Two rules:

- a module may import its own room (package or top-level module) and any room on a
  *lower* layer; rooms on the same layer are siblings that do not know each other;
- no import circle between modules (inside a room too).

A room that is missing from :data:`LAYERS` fails the test: a new package must be
placed in the drawing (and docs/architecture.md) before it is used.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "tokenlens"

# Top layer first. Keep in step with docs/architecture.md (test_doc_draws_the_layers).
LAYERS: tuple[tuple[str, ...], ...] = (
    ("__main__",),
    ("cli",),
    ("demo", "doctor"),
    ("report", "testing"),
    ("analysis", "bench"),
    ("replay",),
    ("trace",),
    ("salvage",),
    ("rundir", "bench_results"),
    ("capture",),
    ("engine", "text", "corpora"),
    ("corpus_manifest",),
    ("models", "prompts", "packaged", "signature", "format_version", "dirlock"),
    ("errors", "format", "progress", "arrays", "tokenlens"),
)
LAYER_OF = {room: i for i, rooms in enumerate(LAYERS) for room in rooms}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "tokenlens"


def imported(module: str, path: Path) -> list[tuple[str, int]]:
    """(imported tokenlens module, line) for every import in ``path``, wherever it sits."""
    found: list[tuple[str, int]] = []
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:  # `from tokenlens.capture import plugin`: the module
                sub = f"{target}.{alias.name}"
                found.append((sub if sub in MODULES else target, node.lineno))
    return [(m, line) for m, line in found if m == "tokenlens" or m.startswith("tokenlens.")]


GRAPH: dict[str, set[str]] = defaultdict(set)
ARROWS: list[tuple[str, int, str]] = []
for _name, _path in MODULES.items():
    for _target, _line in imported(_name, _path):
        if _target != _name:
            GRAPH[_name].add(_target)
            ARROWS.append((_name, _line, _target))


def wrong_way(arrows: list[tuple[str, int, str]]) -> list[str]:
    bad = []
    for source, line, target in arrows:
        a, b = room(source), room(target)
        if a == b:
            continue
        if a not in LAYER_OF or b not in LAYER_OF:
            bad.append(f"{source}:{line} -> {target}: room not in LAYERS (place it first)")
        elif LAYER_OF[b] <= LAYER_OF[a]:
            how = "a sibling of" if LAYER_OF[a] == LAYER_OF[b] else "on a higher layer than"
            bad.append(f"{source}:{line} -> {target}: {b} is {how} {a}")
    return bad


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in sorted(set(graph) | {t for ts in graph.values() for t in ts}):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_every_room_is_placed() -> None:
    rooms = {room(m) for m in MODULES}
    assert sorted(rooms - set(LAYER_OF)) == []
    assert sorted(set(LAYER_OF) - rooms) == []


def test_imports_follow_the_layers() -> None:
    assert wrong_way(ARROWS) == []


def test_no_import_circle() -> None:
    assert circles(GRAPH) == []


def test_the_checks_catch_what_they_should() -> None:
    """The rules themselves: a wrong-way arrow, a sibling arrow and a circle are found."""
    assert wrong_way([("tokenlens.engine.worker", 1, "tokenlens.capture")])
    assert wrong_way([("tokenlens.analysis.speed", 1, "tokenlens.bench.measure")])
    assert not wrong_way([("tokenlens.bench.measure", 1, "tokenlens.bench_results")])
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


@pytest.mark.parametrize("rooms", LAYERS, ids=lambda rooms: "+".join(rooms))
def test_doc_draws_the_layers(rooms: tuple[str, ...]) -> None:
    """docs/architecture.md's drawing has one line per layer, naming the same rooms."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    drawing = text.split("```")[1]
    lines = [line.split("#")[0].split() for line in drawing.strip().splitlines()]
    assert sorted(rooms) in [sorted(words) for words in lines]
