"""The package's layers, as docs/architecture.md draws them, checked on the code's imports.

Contract: every dependency of one ``tokenlens`` module on another is an *arrow*, and
arrows run down the layers of :data:`LAYERS` only (siblings on one layer do not know
each other), with no circle between modules. An arrow is, wherever it sits (module top,
function body, ``if TYPE_CHECKING:``):

- an ``import`` / ``from ... import`` statement;
- ``importlib.import_module(NAME)``, ``__import__(NAME)`` or
  ``importlib.util.find_spec(NAME)``, NAME a string or a module-level string constant;
  any other argument is a blind spot and fails the test;
- a string that names a tokenlens module or object (``"tokenlens.engine.worker"``,
  ``"tokenlens.capture.plugin:register"``) and is in :data:`BY_NAME`: code called by
  name (``python -m``, entry points, vLLM's worker extension), with the reason it is
  named rather than imported; it must resolve. Every other such string is in
  :data:`NOT_CODE` (a logger's name, a package-data anchor), with its reason, or fails.

Also here: docs/architecture.md draws the same layers in the same order, a room that is
missing from :data:`LAYERS` fails (a new package is placed in the drawing before it is
used), and no package file exceeds :data:`MAX_LINES` lines unless its docstring says
why (``Why one file over 450 lines: ...``), and none exceeds :data:`HARD_MAX_LINES`.
"""

from __future__ import annotations

import ast
import re
import tomllib
from collections import defaultdict
from pathlib import Path

import pytest

from tests.support import docstring_ids

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

# Every tokenlens module or object the package names in a string, and why it is called
# by name instead of imported. A new one is added here (and obeys the layers).
BY_NAME: dict[str, str] = {
    "tokenlens.capture.plugin:register": "vLLM's general_plugins entry point "
    "(pyproject.toml); doctor checks that it is registered",
    "tokenlens.engine.facts.EngineFactsExtension": "vLLM imports it into its own workers "
    "(worker_extension_cls)",
    "tokenlens.engine.worker": "the engine subprocess (python -m), which owns vLLM",
    "tokenlens.engine.ngram_kernel": "vLLM's n-gram kernel in a subprocess (python -m) "
    "when no engine is up",
}
# Strings that name a tokenlens package but run no code of it, and what they are.
NOT_CODE: dict[str, str] = {
    "tokenlens.capture": "the plugin's logger name",
    "tokenlens.report": "the package whose templates folder jinja2 and importlib.resources "
    "read (its own data)",
    "tokenlens.testing": "the argv a simulated run's manifest records",
}
NAMED = re.compile(r"tokenlens(?:\.[A-Za-z_]\w*)+(?::[A-Za-z_][\w.]*)?")
IMPORTERS = {"import_module", "__import__"}  # and importlib.util.find_spec
REASON = "Why one file over 450 lines:"
MAX_LINES, HARD_MAX_LINES = 450, 500


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "tokenlens"


def _constants(tree: ast.Module) -> dict[str, str]:
    """Module-level ``NAME = "text"`` assignments."""
    out = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
            for target in node.targets:
                if isinstance(target, ast.Name) and isinstance(node.value.value, str):
                    out[target.id] = node.value.value
    return out


def _is_importer(call: ast.Call) -> bool:
    f = call.func
    if isinstance(f, ast.Name):
        return f.id in IMPORTERS
    if isinstance(f, ast.Attribute):
        if f.attr in IMPORTERS:
            return True
        owner = f.value
        return f.attr == "find_spec" and (
            (isinstance(owner, ast.Attribute) and owner.attr == "util")
            or (isinstance(owner, ast.Name) and owner.id in {"util", "importlib"})
        )
    return False


def target_module(name: str) -> str | None:
    """The tokenlens module a by-name target lives in (None: no such module)."""
    dotted = name.partition(":")[0]
    parts = dotted.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in MODULES:
            return candidate if ":" not in name or end == len(parts) else None
    return None


def resolves(name: str) -> bool:
    """Whether ``name`` (``module``, ``module:obj`` or ``module.Obj``) exists."""
    module = target_module(name)
    if module is None:
        return False
    rest = name.partition(":")[2] or name.partition(":")[0][len(module) + 1 :]
    if not rest:
        return True
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    defined = {
        n.name
        for n in tree.body
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
    } | set(_constants(tree))
    return rest.split(".")[0] in defined


def arrows_of(
    module: str, tree: ast.Module, is_package: bool = False
) -> tuple[list[tuple[str, int]], list[tuple[str, int]], list[str]]:
    """(arrows as (tokenlens module, line), by-name targets as (name, line), blind spots)."""
    found: list[tuple[str, int]] = []
    named: list[tuple[str, int]] = []
    blind: list[str] = []
    package = module.split(".") if is_package else module.split(".")[:-1]
    constants = _constants(tree)
    skip = docstring_ids(tree)
    for node in ast.walk(tree):
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
        elif isinstance(node, ast.Call) and _is_importer(node):
            arg = node.args[0] if node.args else None
            skip.add(id(arg))  # an arrow below, not a name to register
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                name: str | None = arg.value
            elif isinstance(arg, ast.Name):
                name = constants.get(arg.id)
            else:
                name = None
            if name is None or name.startswith("."):
                blind.append(f"{module}:{node.lineno}: a module imported by a computed name")
            else:
                found.append((name, node.lineno))
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in skip
            and NAMED.fullmatch(node.value)
        ):
            named.append((node.value, node.lineno))
            if node.value in BY_NAME:
                module_of = target_module(node.value) or node.value.partition(":")[0]
                found.append((module_of, node.lineno))
    arrows = [(m, line) for m, line in found if m == "tokenlens" or m.startswith("tokenlens.")]
    return arrows, named, blind


GRAPH: dict[str, set[str]] = defaultdict(set)
ARROWS: list[tuple[str, int, str]] = []
NAMED_TARGETS: list[tuple[str, str, int]] = []  # (name, module naming it, line)
BLIND: list[str] = []
for _name, _path in MODULES.items():
    _tree = ast.parse(_path.read_text(encoding="utf-8"))
    _arrows, _named, _blind = arrows_of(_name, _tree, _path.name == "__init__.py")
    for _target, _line in _arrows:
        if _target != _name:
            GRAPH[_name].add(_target)
            ARROWS.append((_name, _line, _target))
    NAMED_TARGETS += [(n, _name, line) for n, line in _named]
    BLIND += _blind


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


def test_no_module_is_imported_by_a_computed_name() -> None:
    assert BLIND == []


def test_every_name_called_by_name_is_registered_and_resolves() -> None:
    found = {name for name, _, _ in NAMED_TARGETS}
    unregistered = [
        f"{m}:{line} {n}" for n, m, line in NAMED_TARGETS if n not in BY_NAME and n not in NOT_CODE
    ]
    assert unregistered == [], "add each to BY_NAME (or NOT_CODE) with its reason"
    assert sorted((set(BY_NAME) | set(NOT_CODE)) - found) == [], "a name no module uses"
    assert [n for n in BY_NAME if not resolves(n)] == []


def test_entry_points_resolve() -> None:
    """pyproject.toml's console script and vLLM plugin name objects that exist."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    targets = list(project["scripts"].values())
    targets += [t for group in project["entry-points"].values() for t in group.values()]
    assert targets and [t for t in targets if not resolves(t)] == []


def test_the_checks_catch_what_they_should(monkeypatch: pytest.MonkeyPatch) -> None:
    """The rules themselves: a wrong-way arrow, a sibling arrow, a circle, an import by
    name, a computed import and a by-name target are all found."""
    assert wrong_way([("tokenlens.engine.worker", 1, "tokenlens.capture")])
    assert wrong_way([("tokenlens.analysis.speed", 1, "tokenlens.bench.measure")])
    assert not wrong_way([("tokenlens.bench.measure", 1, "tokenlens.bench_results")])
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []
    source = (
        "import importlib\n"
        "CLI = 'tokenlens.cli'\n"
        "def f(name):\n"
        "    importlib.import_module('tokenlens.cli')\n"
        "    __import__(CLI)\n"
        "    importlib.util.find_spec('tokenlens.report')\n"
        "    importlib.import_module(name)\n"
        "    return 'tokenlens.replay.passes:run'\n"
    )
    arrows, named, blind = arrows_of("tokenlens.engine.x", ast.parse(source))
    assert sorted(t for t, _ in arrows) == ["tokenlens.cli", "tokenlens.cli", "tokenlens.report"]
    assert len(wrong_way([("tokenlens.engine.x", line, t) for t, line in arrows])) == 3
    # the by-name target is found (and must be registered before it counts as an arrow)
    assert named == [("tokenlens.cli", 2), ("tokenlens.replay.passes:run", 8)]
    assert len(blind) == 1
    # registered, a by-name target is an arrow like any import: engine -> replay is refused
    monkeypatch.setitem(BY_NAME, "tokenlens.replay.passes:run", "a test")
    arrows, _, _ = arrows_of("tokenlens.engine.x", ast.parse(source))
    assert ("tokenlens.replay.passes", 8) in arrows
    assert wrong_way([("tokenlens.engine.x", 8, "tokenlens.replay.passes")])
    assert resolves("tokenlens.replay.passes:run") and resolves("tokenlens.engine.worker")
    assert not resolves("tokenlens.replay.passes:nothing_here")
    assert not resolves("tokenlens.no_such_room:main")


def drawn_layers(text: str) -> list[list[str]]:
    """The drawing's rooms, one sorted list per line, top line first."""
    drawing = text.split("```")[1]
    return [sorted(line.split("#")[0].split()) for line in drawing.strip().splitlines()]


def test_doc_draws_the_layers() -> None:
    """docs/architecture.md's drawing has one line per layer, in this order, naming the
    same rooms."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert drawn_layers(text) == [sorted(rooms) for rooms in LAYERS]


def test_the_doc_check_sees_the_order() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    lines = text.split("```")[1].strip().splitlines()
    lines[2], lines[3] = lines[3], lines[2]
    swapped = text.replace(text.split("```")[1].strip(), "\n".join(lines))
    assert drawn_layers(swapped) != [sorted(rooms) for rooms in LAYERS]


def too_long(path: Path) -> str | None:
    """Why ``path`` breaks the line rule, or None."""
    text = path.read_text(encoding="utf-8")
    n = text.count("\n")
    if n <= MAX_LINES:
        return None
    if n > HARD_MAX_LINES:
        return f"{n} lines (> {HARD_MAX_LINES}, whatever the reason: split it)"
    doc = ast.get_docstring(ast.parse(text)) or ""
    return None if REASON in doc else f"{n} lines and no '{REASON}' in its docstring"


def test_files_stay_short_or_say_why() -> None:
    found = {str(p.relative_to(ROOT)): too_long(p) for p in MODULES.values()}
    assert {p: why for p, why in found.items() if why} == {}


def test_the_line_rule_sees_a_long_file(tmp_path: Path) -> None:
    body = "x = 1\n" * 459
    (tmp_path / "plain.py").write_text('"""A module."""\n' + body)
    (tmp_path / "reasoned.py").write_text(f'"""A module.\n\n{REASON} one loop."""\n' + body)
    assert too_long(tmp_path / "plain.py") and not too_long(tmp_path / "reasoned.py")
    (tmp_path / "huge.py").write_text(f'"""{REASON} no."""\n' + "x = 1\n" * 501)
    assert too_long(tmp_path / "huge.py")
