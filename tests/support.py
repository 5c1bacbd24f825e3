"""Helpers shared by tests (importable as ``tests.support``).

Test modules import shared data and helpers from here (or get them as conftest
fixtures), never from one another.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import shutil
from collections.abc import Sequence
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from tokenlens.bench.results_csv import COLUMN_NAMES, Row, read_results, write_results
from tokenlens.capture.reconcile import reconcile
from tokenlens.rundir import Run

REPO = Path(__file__).resolve().parent.parent


def needs(module: str) -> pytest.MarkDecorator:
    """Skip unless ``module`` is importable: the fast suite also runs without vLLM,
    torch and transformers, with the newest core dependencies (scripts/test_newest.sh)."""
    return pytest.mark.skipif(
        importlib.util.find_spec(module) is None, reason=f"needs {module} (the vLLM set-up)"
    )


def write_prompts(path: Path, prompts: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(p, ensure_ascii=False) + "\n" for p in prompts), "utf-8")
    return path


def japanese_share(text: str) -> float:
    """Share of kana/kanji among non-space characters."""
    chars = [c for c in text if not c.isspace()]
    ja = [c for c in chars if "\u3040" <= c <= "\u30ff" or "\u4e00" <= c <= "\u9fff"]
    return len(ja) / max(1, len(chars))


def ascii_share(text: str) -> float:
    chars = [c for c in text if not c.isspace()]
    return sum(c.isascii() for c in chars) / max(1, len(chars))


def check_events(run: Run) -> None:
    """The contract's invariant against vLLM's counters, and the token identities."""
    assert run.events is not None
    assert reconcile(run.events, run.metrics) == []
    outputs = {r["request_id"]: r["output_token_ids"] for r in run.requests.to_pylist()}
    judged = 0
    for ev in run.events.to_pylist():
        assert ev["request_id"] in outputs
        if ev["accepted"]:
            assert ev["emitted_token_id"] == ev["draft_token_id"]
        if ev["output_index"] is not None:
            assert outputs[ev["request_id"]][ev["output_index"]] == ev["emitted_token_id"]
            judged += 1
    assert judged > 0


REAL_RUN = REPO / "tests" / "data" / "run-dm3"
"""A real traced run (embedded pair, draft model k=3, float32, --cap-tokens 24: two demo
prompts that stop at the length and two one-word answers that stop at the end of turn)
with its capture directory: step files, the worker's request-id map and finished records."""


def copy_run(dest: Path, source: Path = REAL_RUN) -> Path:
    shutil.copytree(source, dest)
    return dest


def cli(argv: list[str]) -> tuple[int, str, str]:
    """The real ``tokenlens.cli.main`` in-process: (exit status, stdout, stderr)."""
    from tokenlens.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main(argv)
        except SystemExit as exc:  # argparse: --help, usage errors
            status = exc.code if isinstance(exc.code, int) else 1
    return status, out.getvalue(), err.getvalue()


def assert_one_line_error(status: int, stderr: str, *needles: str) -> None:
    """Non-zero exit, exactly one line on stderr, no traceback, and every needle in it."""
    assert status != 0, stderr
    assert stderr.count("\n") == 1 and stderr.endswith("\n"), stderr
    assert "Traceback" not in stderr, stderr
    for needle in needles:
        assert needle in stderr, stderr


def process_gone(pid: int) -> bool:
    """True when ``pid`` no longer runs (absent, or a zombie nobody reaped yet)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


def first_divergence(a: Sequence[int], b: Sequence[int]) -> int | None:
    """The first index where two token sequences differ (the shorter one's length when
    one is a prefix of the other), or None when they are equal."""
    if list(a) == list(b):
        return None
    return next(
        (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b))
    )


# --- untrusted text -----------------------------------------------------------------------

# Each string attacks one place text enters a page or a Markdown file; U+2028/U+2029 end
# lines in older JavaScript parsers, "<!--" changes the HTML parser's state inside
# <script>.
PAYLOADS = (
    "<script>document.title='PWNED'</script>",
    "</script><script>window.__pwned=1</script>",
    '"><img src=x onerror="window.__pwned=2">',
    "</textarea><b id=pwn>bold</b>",
    "line\u2028sep\u2029end",
    "<!--<script>window.__pwned=3</script>",
)


class _Page(HTMLParser):
    """The elements and the text of a page, as an HTML parser (a browser) reads them."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self._skip = 0  # inside <script> or <style>

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag in ("script", "style"):
            self._skip += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style"):
            self._skip -= 1

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self.text.append(data)


def parse_page(html: str) -> tuple[list[tuple[str, dict[str, str | None]]], str]:
    """(elements with their attributes, visible text) of an HTML page."""
    page = _Page()
    page.feed(html)
    page.close()
    return page.tags, "".join(page.text)


# --- a synthetic bench --------------------------------------------------------------------

BENCH: dict[str, Any] = {
    "signature": "tokenlens:0.1.0|vllm:0.32.0|plan:ja-en-speed@0123abcd",
    "tokenlens_version": "0.1.0",
    "vllm_version": "0.32.0",
    "plan": {"name": "ja-en speed", "description": "MTP vs n-gram on the embedded pair"},
    "plan_sha256": "0123abcd",
    "created_at": "2026-01-02T03:04:05Z",
    "server": None,
    "cases_total": 12,
    "cases_done": 11,
}

WIKI = {"dtype": "bfloat16", "quantization": None, "corpus": "wiki", "length": "short"}
NEWS = {"dtype": "float16", "quantization": "awq", "corpus": "news", "length": "long"}
NGRAM = {"method_label": "ngram", "method": "ngram", "k": 3}
MTP = {"method_label": "mtp", "method": "mtp", "k": 2}
BASE = {"method_label": "baseline", "method": "none", "k": 0}


def bench_case(
    case_id: str, group: dict[str, Any], method: dict[str, Any], lang: str, **values: Any
) -> Row:
    """One results row: the given values, plausible defaults for the rest."""
    row: Row = dict.fromkeys(COLUMN_NAMES)
    row.update(
        case_id=case_id,
        model="qwen3-0.6b",
        model_path="/models/qwen3-0.6b",
        lang=lang,
        prompts=8,
        warmup=1,
        repeats=3,
        concurrency=1,
        output_tokens=1024,
        output_chars=1536 if lang != "en" else 4096,
        output_bytes=4608 if lang != "en" else 4096,
        ttft_s=0.25,
        wall_s=40.0,
        run_dir=f"runs/{case_id}",
        signature=f"tokenlens:0.1.0|case:{case_id}",
        **group,
        **method,
    )
    if method["method"] != "none":
        row.update(num_drafts=300, num_draft_tokens=300 * method["k"], num_accepted_tokens=200)
    row.update(values)
    return row


# case id, setup, method, lang, tok/s and chars/s as "median min max" (only a median:
# no range), acceptance rate, acceptance per position. Plan order, baselines not first.
# Two groups: wiki/short has a baseline and two methods (ngram k=3, mtp k=2) in Japanese
# and English; news/long lacks the English baseline, has Chinese as a third language,
# and one case without per-position acceptance.
SYNTHETIC: tuple[tuple[Any, ...], ...] = (
    # wiki/short: a baseline and two methods in ja and en; c04 had one repeat
    ("c03", WIKI, NGRAM, "ja", "22.0 21.5 22.3", "33.0 32.3 33.4", 0.2, [0.3, 0.2, 0.1]),
    ("c04", WIKI, NGRAM, "en", "35.0 35.0 35.0", "140.0 140.0 140.0", 0.4, [0.6, 0.4, 0.2]),
    ("c01", WIKI, BASE, "ja", "20.0 19.5 20.4", "30.0 29.2 30.6", None, None),
    ("c02", WIKI, BASE, "en", "25.0 24.6 25.3", "100.0 98.4 101.2", None, None),
    ("c05", WIKI, MTP, "ja", "31.2 30.9 31.6", "46.8 46.4 47.4", 0.36, [0.5, 0.22]),
    ("c06", WIKI, MTP, "en", "45.0 44.1 45.9", "180.0 176.4 183.6", 0.5, [0.65, 0.35]),
    # news/long: no English baseline, Chinese as a third language
    ("d03", NEWS, MTP, "ja", "27.0 26.0 27.9", "40.5 39.0 41.9", 0.3, [0.42, 0.18]),
    ("d01", NEWS, BASE, "ja", "18.0 17.0 18.5", "27.0 25.5 27.8", None, None),
    ("d04", NEWS, MTP, "en", "40.0", "164.0", 0.45, None),
    ("d02", NEWS, BASE, "zh", "19.0 18.8 19.1", "26.6 26.3 26.7", None, None),
    ("d05", NEWS, MTP, "zh", "28.5 28.0 29.0", "39.9 39.2 40.6", 0.33, [0.45, 0.21]),
)


def synthetic_rows() -> list[Row]:
    """:data:`SYNTHETIC` as results rows, speedups against the baseline of the same
    setup and language as the bench computes them (none without that baseline)."""
    rows = []
    for case_id, setup, method, lang, tok, chars, acc, per_position in SYNTHETIC:
        row = bench_case(case_id, setup, method, lang, acceptance_rate=acc)
        row["acceptance_per_position"] = per_position
        for column, stats in (("tok_s", tok), ("chars_s", chars)):
            names = (column, column + "_min", column + "_max")
            row.update(zip(names, map(float, stats.split()), strict=False))
        rows.append(row)
    for row in rows:
        base = [b for b in rows if b["method"] == "none" and b["lang"] == row["lang"]]
        base = [b for b in base if b["corpus"] == row["corpus"]]
        if base:
            row["baseline_case_id"] = base[0]["case_id"]
            row["speedup_tok_s"] = row["tok_s"] / base[0]["tok_s"]
            row["speedup_chars_s"] = row["chars_s"] / base[0]["chars_s"]
    return rows


def roundtrip(rows: list[Row], tmp_path: Path) -> list[Row]:
    """The rows as read back from a results.csv."""
    path = tmp_path / "results.csv"
    write_results(path, rows)
    return read_results(path)


def write_bench(root: Path, rows: list[Row], bench: dict[str, Any] | None = BENCH) -> Path:
    """A bench directory as ``tokenlens bench`` leaves it (results.csv, bench.json)."""
    root.mkdir(parents=True, exist_ok=True)
    write_results(root / "results.csv", rows)
    if bench is not None:
        (root / "bench.json").write_text(json.dumps(bench, ensure_ascii=False), "utf-8")
    return root


def poisoned_bench(root: Path) -> Path:
    """The synthetic bench with attack strings wherever a plan puts text: the n-gram
    method's label, the wiki corpus name, a model and a draft model name, the plan's
    name and description, and the bench signature."""
    rows = synthetic_rows()
    for row in rows:
        if row["method_label"] == "ngram":
            row["method_label"] = PAYLOADS[1]
            row["draft_model"] = PAYLOADS[5]
        if row["corpus"] == "wiki":
            row["corpus"] = PAYLOADS[2]
        else:
            row["model"] = PAYLOADS[3]
    plan = {"name": PAYLOADS[0], "description": " ".join(PAYLOADS)}
    return write_bench(root, rows, dict(BENCH, plan=plan, signature=PAYLOADS[4]))


# --- a bench plan ---------------------------------------------------------------------------

PLAN = """
[bench]
warmup = 1
repeats = 2

[[model]]
name = "m"
path = "some/model"

[[method]]
name = "baseline"
method = "none"

[[method]]
name = "ng"
method = "ngram"
k = [1, 3]

[[corpus]]
name = "c"
path = "prompts.jsonl"
"""


def write_plan(tmp_path: Path, text: str = PLAN) -> Path:
    """``text`` as tmp_path/plan.toml beside the four prompts its corpus names."""
    write_prompts(
        tmp_path / "prompts.jsonl",
        [
            {"id": "a-ja", "lang": "ja", "text": "こんにちは", "tags": {"length": "medium"}},
            {"id": "a-en", "lang": "en", "text": "hello", "tags": {"length": "medium"}},
            {"id": "b-ja", "lang": "ja", "text": "さようなら", "tags": {"length": "long"}},
            {"id": "b-en", "lang": "en", "text": "goodbye", "tags": {"length": "long"}},
        ],
    )
    path = tmp_path / "plan.toml"
    path.write_text(text, encoding="utf-8")
    return path
