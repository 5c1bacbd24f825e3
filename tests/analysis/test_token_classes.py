"""The token-class table is the one place a class column is described, and class codes
are found by name.

Contract checked: every site that lists class columns derives its list from
:data:`TOKEN_CLASSES` (so a new column is one entry plus its classifier); every
column the table names is computed (by the text layer's classifier or by the join);
the text layer's codes into its class names are derived from the names, so inserting
or reordering a name in a scratch copy of ``classify.py`` labels every token as before.
"""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path

import pytest

from tokenlens.analysis import token_classes
from tokenlens.analysis.breakdown import BREAKDOWNS
from tokenlens.analysis.classes import DECLARED
from tokenlens.analysis.comparable import PER_LANGUAGE, not_comparable
from tokenlens.analysis.explore import EXPLORE_COLUMNS
from tokenlens.analysis.gap_section import DESCRIBE_BY
from tokenlens.analysis.join import CLASS_COLUMNS
from tokenlens.analysis.token_classes import TOKEN_CLASSES, class_label
from tokenlens.report.charts import RATE_SECTIONS
from tokenlens.report.findings_gap import DECOMPOSITIONS
from tokenlens.text import BOUNDARIES, SCRIPTS, TOKEN_SCHEMA, classify_tokens
from tokenlens.text import CLASS_COLUMNS as TEXT_CLASS_COLUMNS

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "tokenlens"


def test_places_are_one_to_n() -> None:
    for attr in ("declared", "decomposed"):
        places = sorted(getattr(c, attr) for c in TOKEN_CLASSES if getattr(c, attr) is not None)
        assert places == list(range(1, len(places) + 1)), attr
    columns = [c.column for c in TOKEN_CLASSES]
    assert len(columns) == len(set(columns))
    breakdowns = [c.breakdown for c in TOKEN_CLASSES if c.breakdown]
    assert len(breakdowns) == len(set(breakdowns))


def test_every_site_lists_what_the_table_says() -> None:
    assert [(b.name, b.column) for b in BREAKDOWNS] == [
        (c.breakdown, c.column) for c in TOKEN_CLASSES if c.breakdown
    ]
    assert token_classes.declared() == DECLARED
    assert token_classes.explored() == EXPLORE_COLUMNS
    assert token_classes.decomposed() == DESCRIBE_BY
    assert [key for key, _, _ in RATE_SECTIONS] == [c.breakdown for c in token_classes.charted()]
    assert [column for column, _ in DECOMPOSITIONS[1:]] == list(DESCRIBE_BY)
    assert {c.column: c.per_language for c in TOKEN_CLASSES if c.per_language} == PER_LANGUAGE


def test_one_label_per_column() -> None:
    """The boundary breakdown once had three names; now every title says the label."""
    for key, title, _ in RATE_SECTIONS:
        entry = next(c for c in TOKEN_CLASSES if c.breakdown == key)
        assert title == f"Acceptance by {entry.label}"
    assert dict(DECOMPOSITIONS[1:]) == {c: class_label(c) for c in DESCRIBE_BY}
    assert class_label("boundary") == "morpheme boundary"
    assert class_label("not_a_column") == "not_a_column"


def test_labels_and_breakdown_names_are_written_once() -> None:
    """No module other than the table spells a class's words or breakdown name."""
    owned = {c.label for c in TOKEN_CLASSES if " " in c.label}
    owned |= {c.axis for c in TOKEN_CLASSES if c.axis}
    owned |= {c.breakdown for c in TOKEN_CLASSES if c.breakdown} - {"by_script", "by_confidence"}
    found = []
    for path in PACKAGE.rglob("*.py"):
        if path.name == "token_classes.py":
            continue
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.Constant) and node.value in owned:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.value!r}")
    assert not found, "spelled outside the token-class table:\n" + "\n".join(found)


def test_every_column_is_computed() -> None:
    """A ``classify`` column is one the text layer's classifier writes; the join takes
    every one of them; a ``join`` column is made there."""
    assert tuple(TOKEN_SCHEMA.names[TOKEN_SCHEMA.names.index("script") :]) == TEXT_CLASS_COLUMNS
    assert ("token_text", *TEXT_CLASS_COLUMNS) == CLASS_COLUMNS
    join_source = (PACKAGE / "analysis" / "join.py").read_text("utf-8")
    for c in TOKEN_CLASSES:
        assert c.source in ("classify", "join", "step"), c
        if c.source == "classify":
            assert c.column in TEXT_CLASS_COLUMNS, c.column
        elif c.source == "join":
            assert f'frame["{c.column}"] =' in join_source, c.column
    values = {"script": SCRIPTS, "boundary": BOUNDARIES}
    for column, classes in PER_LANGUAGE.items():
        for name in classes:
            assert name in values[column] and not_comparable(column, name)


def _scratch_classify(tmp_path: Path, edits: dict[str, str]) -> object:
    """A scratch copy of ``tokenlens/text/classify.py`` with ``edits`` applied, loaded
    as a module of its own."""
    source = (PACKAGE / "text" / "classify.py").read_text("utf-8")
    for old, new in edits.items():
        assert source.count(old) == 1, old
        source = source.replace(old, new)
    path = tmp_path / "classify_scratch.py"
    path.write_text(source, "utf-8")
    spec = importlib.util.spec_from_file_location("classify_scratch", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["classify_scratch"] = module
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules["classify_scratch"]
    return module


TEXTS = {
    "ja": "私は昨日、東京の「ラーメン」を食べました。コーヒー☕ 100円 ok",
    "en": "The quick brown fox (don't) jumps: x_id=42; ### **bold** ☕\n",
}


@pytest.mark.parametrize("lang", sorted(TEXTS))
def test_inserting_a_class_name_mislabels_no_token(tmp_path: Path, lang: str) -> None:
    from tokenlens.text.tokenizers import load_tokenizer

    vocab = load_tokenizer("qwen2.5")
    ids = vocab.encode(TEXTS[lang])
    scratch = _scratch_classify(
        tmp_path,
        {
            'SCRIPTS = (*CLASS_NAMES[: SPACE + 1], "mixed", "byte_fragment")': (
                'SCRIPTS = ("emoji", *reversed((*CLASS_NAMES[: SPACE + 1], "mixed", '
                '"byte_fragment")))'
            ),
            'BOUNDARIES = ("same", "inside", "spans", "crosses", "fragment")': (
                'BOUNDARIES = ("fragment", "straddles", "crosses", "spans", "inside", "same")'
            ),
        },
    )
    assert scratch.SCRIPTS[0] == "emoji"  # type: ignore[attr-defined]
    mine = classify_tokens(ids, vocab, lang)
    theirs = scratch.classify_tokens(ids, vocab, lang)  # type: ignore[attr-defined]
    for column in ("script", "boundary", "transition"):
        assert theirs.column(column).to_pylist() == mine.column(column).to_pylist(), column
    assert len(set(mine.column("script").to_pylist())) >= 5  # the text covers classes


def _hand_numbered(path: Path) -> list[str]:
    """Module-level ``A, B, ... = range(n)`` or ``= 6, 8, ...``: codes numbered by hand."""
    out = []
    for node in ast.parse(path.read_text("utf-8")).body:
        if not (isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Tuple)):
            continue
        value = node.value
        by_range = (
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Name)
            and value.func.id == "range"
        )
        by_hand = isinstance(value, ast.Tuple) and all(
            isinstance(e, ast.Constant) and isinstance(e.value, int) for e in value.elts
        )
        if by_range or by_hand:
            out.append(f"{path.name}:{node.lineno}")
    return out


# Where class codes are *defined* (the names are built from them and pinned by a test).
CODES_DEFINED = {"tokenlens/text/charclass.py"}


def test_no_class_code_is_numbered_by_hand(tmp_path: Path) -> None:
    found = [
        hit
        for room in ("text", "analysis", "report")
        for path in sorted((PACKAGE / room).rglob("*.py"))
        if str(path.relative_to(ROOT)) not in CODES_DEFINED
        for hit in _hand_numbered(path)
    ]
    assert not found, "codes into class names numbered by hand:\n" + "\n".join(found)
    scratch = tmp_path / "numbered.py"
    scratch.write_text("_SYMBOL, _SPACE_S, _MIXED = 6, 8, 9\n_A, _B = range(2)\n", "utf-8")
    assert len(_hand_numbered(scratch)) == 2


def test_character_codes_name_themselves() -> None:
    from tokenlens.text import charclass as cc

    for name in ("hiragana", "katakana", "kanji", "latin", "digit", "punct", "symbol", "other"):
        assert cc.CLASS_NAMES[getattr(cc, name.upper())] == name
    assert cc.CLASS_NAMES[cc.SPACE] == "space"
