"""The bench report: chart specs through their JSON (data values and encodings), the
page (self-contained, tables, signatures, exported charts) and escaping of names that
come from a plan file. Data: the synthetic bench of tests/support.py (its results.md is
golden-tested in tests/bench/test_tables.py)."""

from __future__ import annotations

import json
import re
from html import unescape
from pathlib import Path
from typing import Any

import pytest

from tests.support import (
    BENCH,
    PAYLOADS,
    parse_page,
    poisoned_bench,
    roundtrip,
    synthetic_rows,
    write_bench,
)
from tokenlens.bench.results_md import group_label, results_markdown
from tokenlens.bench_results import Row
from tokenlens.errors import TokenlensError
from tokenlens.report import write_bench_report
from tokenlens.report.bench import CHART_IDS, bench_charts, position_chart, speedup_chart
from tokenlens.report.bench import throughput_chart as throughput
from tokenlens.report.html import vega_bundle

SPECS = re.compile(r'<script type="application/json" id="tl-specs">(.*?)</script>', re.S)
WIKI_LABEL = "qwen3-0.6b (bfloat16) · corpus wiki · length short"
NEWS_LABEL = "qwen3-0.6b (float16, awq) · corpus news · length long"


def unit_specs(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """Every unit spec (one with a mark) inside concat/layer/facet wrappers."""
    found = []
    for key in ("vconcat", "hconcat", "layer"):
        for child in spec.get(key, []):
            found += unit_specs(child)
    if "spec" in spec:
        found += unit_specs(spec["spec"])
    if "mark" in spec:
        found.append(spec)
    return found


def marks(spec: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Encodings by mark type."""
    return {unit["mark"]["type"]: unit.get("encoding", {}) for unit in unit_specs(spec)}


@pytest.fixture(scope="module")
def rows(tmp_path_factory: pytest.TempPathFactory) -> list[Row]:
    return roundtrip(synthetic_rows(), tmp_path_factory.mktemp("csv"))


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_bench_report(write_bench(tmp_path_factory.mktemp("bench"), synthetic_rows()))


@pytest.mark.parametrize("column", ["tok_s", "chars_s"])
def test_throughput_chart_has_every_case_with_its_range(rows: list[Row], column: str) -> None:
    spec = throughput(rows, column, "y", "t")
    by_case = {r["case_id"]: r for r in spec["data"]["values"]}
    assert set(by_case) == {r["case_id"] for r in rows}
    for row in rows:
        got = by_case[row["case_id"]]
        assert got["lang"] == row["lang"] and got["group"] == group_label(row)
        for name in (column, f"{column}_min", f"{column}_max"):
            assert got[name] == row[name]
    assert by_case["c03"]["variant"] == "ngram k=3" and by_case["c01"]["variant"] == "baseline"
    enc = marks(spec)
    assert enc["point"]["y"]["field"] == column
    assert (enc["rule"]["y"]["field"], enc["rule"]["y2"]["field"]) == (
        f"{column}_min",
        f"{column}_max",
    )
    for unit in enc.values():  # languages side by side, in the same slot everywhere
        assert unit["x"]["field"] == "variant"
        assert unit["x"]["sort"] == ["baseline", "ngram k=3", "mtp k=2"]
        assert unit["xOffset"]["field"] == "lang"
        assert unit["xOffset"]["scale"]["domain"] == ["ja", "en", "zh"]
        assert unit["color"]["scale"]["domain"] == ["ja", "en", "zh"]
    assert spec["facet"]["field"] == "group"
    assert spec["facet"]["sort"] == [WIKI_LABEL, NEWS_LABEL]
    assert spec["resolve"]["scale"] == {"x": "independent", "xOffset": "independent"}


def test_speedup_chart_has_cases_with_a_baseline_only(rows: list[Row]) -> None:
    spec = speedup_chart(rows)
    got = {r["case_id"]: r["speedup_tok_s"] for r in spec["data"]["values"]}
    # no baselines; d04 (English, news) has no baseline to compare with
    assert got == {
        "c03": pytest.approx(22.0 / 20.0),
        "c04": pytest.approx(35.0 / 25.0),
        "c05": pytest.approx(31.2 / 20.0),
        "c06": pytest.approx(45.0 / 25.0),
        "d03": pytest.approx(27.0 / 18.0),
        "d05": pytest.approx(28.5 / 19.0),
    }
    enc = marks(spec)
    assert enc["bar"]["y"]["field"] == "speedup_tok_s"
    assert enc["bar"]["y2"] == {"datum": 1}  # bars grow from 1x
    assert enc["rule"]["y"] == {"datum": 1}
    assert enc["bar"]["x"]["sort"] == ["ngram k=3", "mtp k=2"]
    assert enc["bar"]["xOffset"]["field"] == "lang"
    assert spec["facet"]["sort"] == [WIKI_LABEL, NEWS_LABEL]


def test_speedup_panels_only_for_groups_with_a_speedup(rows: list[Row]) -> None:
    no_news = [dict(r, speedup_tok_s=None) if r["corpus"] == "news" else r for r in rows]
    spec = speedup_chart(no_news)
    assert spec["facet"]["sort"] == [WIKI_LABEL]
    assert {r["group"] for r in spec["data"]["values"]} == {WIKI_LABEL}


def test_position_chart_has_one_point_per_draft_position(rows: list[Row]) -> None:
    spec = position_chart(rows)
    panels = spec["vconcat"]
    assert [p["title"]["text"] for p in panels] == [WIKI_LABEL, NEWS_LABEL]
    points = {
        (r["case_id"], r["position"]): r["acceptance"] for p in panels for r in p["data"]["values"]
    }
    expected = {
        (row["case_id"], j): value
        for row in rows
        for j, value in enumerate(row["acceptance_per_position"] or [], start=1)
    }
    assert points == expected and ("c03", 3) in points and ("c05", 3) not in points
    assert not any(case in {"c01", "c02", "d01", "d02", "d04"} for case, _ in points)
    assert [p["facet"]["sort"] for p in panels] == [["ngram k=3", "mtp k=2"], ["mtp k=2"]]
    assert all(p["facet"]["field"] == "variant" for p in panels)
    line = marks(spec)["line"]
    assert line["x"] == {
        "axis": {"labelAngle": 0},
        "field": "position",
        "title": "draft position",
        "type": "ordinal",
    }
    assert line["y"]["field"] == "acceptance" and line["y"]["scale"]["domain"] == [0, 1]
    assert line["color"]["field"] == "lang"


def test_only_baselines_give_no_speedup_or_position_chart(rows: list[Row], tmp_path: Path) -> None:
    baselines = [r for r in rows if r["method"] == "none"]
    assert set(bench_charts(baselines)) == {"tok_s", "chars_s"}
    report = write_bench_report(write_bench(tmp_path, baselines, None), export=False)
    assert not (tmp_path / "charts").exists()  # refreshing between cases: page only
    html = report.read_text("utf-8")
    assert "No speculative case has a matching baseline" in html
    assert "No case recorded acceptance per draft position." in html
    assert "signature: <code>unknown</code>" in html  # no bench.json yet


def test_page_is_self_contained_with_specs_tables_and_signatures(
    report: Path, rows: list[Row]
) -> None:
    html = report.read_text("utf-8")
    assert html.count("window.vegaEmbed=") == 1 and html.count("</script>") == 3
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html)
    found = SPECS.search(html)
    assert found is not None
    assert json.loads(found[1]) == json.loads(json.dumps(bench_charts(rows)))
    for chart_id in CHART_IDS:
        assert f'id="chart-{chart_id}"' in html
    table = html[html.index('<table id="cases"') : html.index("</table></div>")]
    assert table.count("<tr>") == 1 + len(rows)
    assert "<td>31.2 (30.9–31.6)</td><td>–</td><td>46.8 (46.4–47.4)</td>" in table
    assert "<td>1.56×</td><td>1.56×</td>" in table
    pre = html[html.index('<pre id="results-md"') :]
    pre = pre[pre.index(">") + 1 : pre.index("</pre>")]
    assert unescape(pre) == results_markdown(rows, BENCH)
    _, text = parse_page(html[html.index("<footer>") :])
    assert BENCH["signature"] in text
    assert all(r["signature"] in text for r in rows)
    assert "ja-en speed" in html and "11 of 12" in html


def test_charts_are_exported(report: Path) -> None:
    for chart_id in CHART_IDS:
        svg = (report.parent / "charts" / f"{chart_id}.svg").read_text("utf-8")
        assert svg.startswith("<svg")
        assert (report.parent / "charts" / f"{chart_id}.png").read_bytes().startswith(b"\x89PNG")


def test_plan_names_are_escaped_everywhere(tmp_path: Path) -> None:
    html = write_bench_report(poisoned_bench(tmp_path / "bench")).read_text("utf-8")
    assert html.count("</script>") == 3
    page = html.replace(vega_bundle(), "")  # the library's own code mentions <img
    assert "<img" not in page and "<b id=pwn" not in page and "</textarea>" not in page
    assert "<!--" not in page and "<script>document" not in page
    tags, text = parse_page(page)
    assert [t for t, _ in tags if t in ("img", "b", "textarea")] == []
    for payload in PAYLOADS:
        assert payload in text  # shown, as text
    found = SPECS.search(html)
    assert found is not None and "\u2028" not in found[1]
    specs = json.loads(found[1])
    variants = {r["variant"] for r in specs["tok_s"]["data"]["values"]}
    assert f"{PAYLOADS[1]} k=3" in variants  # intact after the trip through the JSON
    assert any(PAYLOADS[2] in label for label in specs["tok_s"]["facet"]["sort"])


def test_missing_results_is_a_one_line_error(tmp_path: Path) -> None:
    with pytest.raises(TokenlensError, match=r"results\.csv: not found"):
        write_bench_report(tmp_path)


def test_bad_bench_json_is_a_one_line_error(tmp_path: Path) -> None:
    write_bench(tmp_path, synthetic_rows()[:1], None)
    (tmp_path / "bench.json").write_text("[1, 2", "utf-8")
    with pytest.raises(TokenlensError, match=r"bench\.json: not valid JSON"):
        write_bench_report(tmp_path)
