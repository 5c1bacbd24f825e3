"""index.html over a study directory laid out as ``tokenlens demo`` leaves it.

The tree: ``bench/`` (the synthetic results of tests/support.py, bench.json,
stand-ins for report.html and results.md), ``runs/`` (the simulated runs of
conftest.py), ``analysis/`` (their real analysis, report.html included),
FINDINGS.md (written by write_findings) and summary.md. Checks: every link resolves
to a file of the tree (anchors to an element of it), the headline numbers are the
summary's and the bench's, missing parts read "not run", and names that come from
files or directories show as text on a page that has no script at all.
"""

from __future__ import annotations

import html
import json
import re
import shutil
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest

from tests.support import BENCH, PAYLOADS, parse_page, synthetic_rows
from tokenlens.bench_results import write_results
from tokenlens.report.findings import write_findings
from tokenlens.report.index import write_index

HREF = re.compile(r'href="([^"]*)"')


def make_study(
    root: Path,
    analysis: Path,
    rows: list[dict[str, Any]],
    bench: dict[str, Any],
    run_names: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A study directory under ``root``; returns the arguments of write_index."""
    summary = json.loads((analysis / "summary.json").read_text("utf-8"))
    shutil.copytree(analysis, root / "analysis")
    runs = []
    for run in summary["runs"]:
        src = Path(run["path"])
        name = (run_names or {}).get(src.name, src.name)
        runs.append(root / "runs" / name)
        shutil.copytree(src, runs[-1])
    (root / "bench").mkdir()
    write_results(root / "bench" / "results.csv", rows)
    (root / "bench" / "bench.json").write_text(json.dumps(bench, ensure_ascii=False), "utf-8")
    for stand_in in ("report.html", "results.md"):
        (root / "bench" / stand_in).write_text("stand-in", "utf-8")
    (root / "summary.md").write_text("# tokenlens demo\n", "utf-8")
    findings = write_findings(root / "FINDINGS.md", root / "analysis", root / "bench")
    return {
        "out": root,
        "bench_dir": root / "bench",
        "analysis_dir": root / "analysis",
        "runs": runs,
        "findings": findings,
        "extra_markdown": [root / "summary.md"],
    }


@pytest.fixture(scope="module")
def study(analysis: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return make_study(tmp_path_factory.mktemp("study"), analysis, synthetic_rows(), BENCH)


@pytest.fixture(scope="module")
def page(study: dict[str, Any]) -> str:
    return write_index(**study).read_text("utf-8")


def links(page: str, out: Path) -> list[tuple[Path, str]]:
    """(target file, anchor) of every link on the page."""
    found = []
    for raw in HREF.findall(page):
        target, _, anchor = html.unescape(raw).partition("#")
        assert "//" not in target and not target.startswith("/")  # relative, nothing remote
        found.append(((out / unquote(target)).resolve(), unquote(anchor)))
    return found


def test_links_resolve_to_every_part(page: str, study: dict[str, Any]) -> None:
    out: Path = study["out"]
    found = links(page, out)
    for target, anchor in found:
        assert target.is_file(), target
        assert out.resolve() in target.parents  # stays inside the study directory
        if anchor:
            assert f'id="{anchor}"' in target.read_text("utf-8")
    targets = {t for t, _ in found}
    expected = [
        out / "bench" / "report.html",
        out / "bench" / "results.md",
        out / "bench" / "results.csv",
        out / "analysis" / "report.html",
        out / "analysis" / "tables.md",
        out / "analysis" / "summary.json",
        out / "FINDINGS.md",
        out / "summary.md",
        *(run / "manifest.json" for run in study["runs"]),
    ]
    assert {p.resolve() for p in expected} <= targets
    report = (out / "analysis" / "report.html").resolve()
    assert {a for t, a in found if t == report} == {"", "token-view", "hyp-H1", "hyp-H2"}


def test_headline_numbers_verdicts_and_signatures(page: str, study: dict[str, Any]) -> None:
    summary = json.loads((study["analysis_dir"] / "summary.json").read_text("utf-8"))
    text = html.unescape(page)
    for lang in ("ja", "en"):
        for block in ("acceptance", "acceptance_judged"):
            s = summary[block][lang]
            assert f"<td>{s['rate']:.3f} [{s['ci_low']:.3f}, {s['ci_high']:.3f}]</td>" in text
    words = {
        "supported": "supported",
        "not_supported": "not supported",
        "no_japanese_deficit": "no Japanese deficit",
        "inconclusive": "inconclusive",
        "insufficient_data": "insufficient data",
    }
    for key in ("H1", "H2"):
        h = summary["hypotheses"][key]
        if h["effect"] is None:
            effect = f"effect not estimable ({h['not_estimable']})"
        else:
            lo, hi = 100 * h["ci_low"], 100 * h["ci_high"]
            effect = f"effect {100 * h['effect']:+.1f} pp [{lo:+.1f}, {hi:+.1f}]"
        card = text[text.index(f"<h3>{key}: ") :]
        assert f'<span class="verdict {h["verdict"]}">{words[h["verdict"]]}</span>' in card
        assert effect in card[: card.index("</div>")]
        if h.get("decision_low") is not None:  # the interval the reading used, next to it
            lo, hi = 100 * h["decision_low"], 100 * h["decision_high"]
            decided = f"; 90% decision interval: {lo:+.1f} to {hi:+.1f} pp</span>"
            assert decided in card[: card.index("</div>")]
        assert h["evidence"] in card
    speed = text[text.index("<h2>Measured speed</h2>") : text.index("<h2>Reports")]
    for lang in ("ja", "en", "zh"):
        cases = [r for r in synthetic_rows() if r["lang"] == lang and r["method"] != "none"]
        best = max((r for r in cases if r["speedup_tok_s"]), key=lambda r: r["speedup_tok_s"])
        assert (
            f"<tr><td>{lang}</td><td>{best['speedup_tok_s']:.2f}×</td>"
            f"<td>{best['speedup_chars_s']:.2f}×</td><td>{best['method_label']}</td>"
            f"<td>{best['k']}</td>"
        ) in speed
    footer = text[text.index("<footer>") :]
    assert f"analysis signature: <code>{summary['signature']}</code>" in footer
    assert f"bench signature: <code>{BENCH['signature']}</code>" in footer
    for run in study["runs"]:
        manifest = json.loads((run / "manifest.json").read_text("utf-8"))
        assert f"run {run.name} signature: <code>{manifest['signature']}</code>" in footer


def test_static_offline_page(page: str, study: dict[str, Any]) -> None:
    assert "<script" not in page.lower()
    policy = re.search(r'http-equiv="Content-Security-Policy" content="([^"]*)"', page)
    assert policy is not None
    assert "default-src 'none'" in html.unescape(policy[1])
    assert "script-src" not in html.unescape(policy[1])
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)
    assert write_index(**study).read_text("utf-8") == page  # same tree, same page


def test_missing_parts_read_not_run(tmp_path: Path) -> None:
    page = write_index(tmp_path / "empty", None, None, [], None).read_text("utf-8")
    for part in ("analysis: not run", "bench: not run"):
        assert part in page
    files = page[page.index('<table class="files">') :]
    for part in ("bench", "analysis", "findings"):
        assert f'<tr><td>{part}</td><td><span class="missing">not run</span></td></tr>' in files
    assert re.search(r'<h2>Runs</h2>\s*<p class="missing">not run</p>', page)
    assert "href=" not in page and "<footer></footer>" in page


def test_broken_parts_are_reported_not_raised(tmp_path: Path) -> None:
    out = tmp_path / "study"
    (out / "analysis").mkdir(parents=True)
    (out / "analysis" / "summary.json").write_text("{not json", "utf-8")
    (out / "bench").mkdir()  # a bench that never wrote results.csv
    (out / "runs" / "r1").mkdir(parents=True)  # a run without its manifest
    (out / "bad-bench").mkdir()
    (out / "bad-bench" / "results.csv").write_text("a,b\n1,2\n", "utf-8")
    page = write_index(out, out / "bench", out / "analysis", [out / "runs" / "r1"], None)
    text = html.unescape(page.read_text("utf-8"))
    assert "analysis: summary.json unreadable:" in text
    assert "bench: not run (results.csv missing)" in text
    assert "manifest.json missing" in text and "FINDINGS" not in text
    bad = write_index(out, out / "bad-bench", None, [], None).read_text("utf-8")
    assert "bench: results.csv unreadable:" in html.unescape(bad)


def test_names_from_files_and_directories_show_as_text(
    poisoned: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    rows = synthetic_rows()
    for row in rows:
        row["method_label"] = PAYLOADS[0]
        row["model"] = PAYLOADS[3]
    bench = dict(
        BENCH, plan={"name": PAYLOADS[1], "description": " ".join(PAYLOADS)}, signature=PAYLOADS[5]
    )
    # Directory names cannot hold "/": the payloads without one name the runs.
    names = {"draft_model": PAYLOADS[2], "ngram": PAYLOADS[4]}
    study = make_study(tmp_path_factory.mktemp("poisoned-study"), poisoned, rows, bench, names)
    manifest_path = study["runs"][0] / "manifest.json"
    manifest = json.loads(manifest_path.read_text("utf-8"))
    manifest["speculative"]["method"] = PAYLOADS[5]
    manifest["status"] = PAYLOADS[0]
    manifest_path.write_text(json.dumps(manifest), "utf-8")
    page = write_index(**study).read_text("utf-8")
    assert "<script" not in page.lower()
    for bad in ("<img", "<b id=pwn", "<!--", "</textarea"):
        assert bad not in page
    tags, text = parse_page(page)
    assert [t for t, _ in tags if t in ("script", "img", "b", "textarea")] == []
    for payload in PAYLOADS:
        assert payload in text
    for target, _ in links(page, study["out"]):  # percent-encoded names still resolve
        assert target.is_file(), target
    assert {run.name for run in study["runs"]} == {PAYLOADS[2], PAYLOADS[4]}
