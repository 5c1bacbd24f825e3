"""Chart specs checked through their JSON: the data they carry and how it is encoded."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tokenlens.analysis.summary_file import parse_summary
from tokenlens.report import charts, charts_gap, charts_speed


@pytest.fixture(scope="module")
def summary(analysis: Path) -> dict[str, Any]:
    return dict(json.loads((analysis / "summary.json").read_text("utf-8")))


def values(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """The inline rows of a spec (Altair puts shared data at the top level)."""
    if "data" in spec:
        return list(spec["data"]["values"])
    (rows,) = spec["datasets"].values()
    return list(rows)


def layers(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """Every unit spec inside concat/layer/facet wrappers."""
    found = []
    for key in ("vconcat", "hconcat", "layer"):
        for child in spec.get(key, []):
            found += layers(child)
    if "spec" in spec:
        found += layers(spec["spec"])
    if "mark" in spec:
        found.append(spec)
    return found


def test_rate_chart_carries_every_group_with_interval_and_count(summary: dict[str, Any]) -> None:
    spec = charts.rate_chart(parse_summary(summary), "by_script", "t", "x")
    rows = {(r["lang"], r["group"]): r for r in values(spec)}
    for lang, groups in summary["by_script"].items():
        for group, stats in groups.items():
            row = rows.pop((lang, group))
            assert row["rate"] == pytest.approx(stats["rate"])
            assert (row["ci_low"], row["ci_high"]) == (stats["ci_low"], stats["ci_high"])
            assert row["n"] == stats["n"] and row["sparse"] == stats["sparse"]
    assert not rows
    marks = {unit["mark"]["type"]: unit["encoding"] for unit in layers(spec)}
    assert marks["rule"]["y"]["field"] == "ci_low" and marks["rule"]["y2"]["field"] == "ci_high"
    assert marks["point"]["y"]["field"] == "rate"
    assert marks["point"]["fill"]["condition"]["test"] == "datum.sparse"  # sparse: hollow
    assert marks["bar"]["y"]["field"] == "n"  # the counts strip
    assert all(m["xOffset"]["field"] == "lang" for m in marks.values())
    assert marks["point"]["color"]["scale"]["domain"] == ["ja", "en"]


def test_positions_are_in_numeric_order(summary: dict[str, Any]) -> None:
    summary = dict(summary, by_position={"ja": {str(p): {"rate": 0.5, "n": 1} for p in (10, 2, 0)}})
    spec = charts.rate_chart(parse_summary(summary), "by_position", "t", "x")
    point = next(u for u in layers(spec) if u["mark"]["type"] == "point")
    assert point["encoding"]["x"]["sort"] == ["0", "2", "10"]


def test_gap_rows_are_percentage_points(summary: dict[str, Any]) -> None:
    rows = charts_gap.gap_rows(parse_summary(summary))
    judged = next(r for r in rows if r["part"] == "judged rows")
    assert judged["value"] == pytest.approx(100 * summary["gap"]["judged"]["value"])
    conf = {r["part"]: r for r in rows if r["by"] == "confidence (trained)"}
    deco = summary["families"]["trained"]["confidence"]
    assert conf["within"]["ci_low"] == pytest.approx(100 * deco["within"]["ci_low"])
    parts = ("composition", "within", "out_of_support")
    assert sum(conf[p]["value"] for p in parts) == pytest.approx(conf["gap"]["value"])


def test_not_estimable_parts_get_no_mark(summary: dict[str, Any]) -> None:
    broken = json.loads(json.dumps(summary))
    dec = broken["families"]["trained"]["confidence"]
    dec["within"] = {"value": None, "ci_low": None, "ci_high": None, "not_estimable": "why"}
    parts = {
        r["part"]
        for r in charts_gap.gap_rows(parse_summary(broken))
        if r["by"] == "confidence (trained)"
    }
    assert "within" not in parts and "composition" in parts  # never drawn as a zero


def test_decomposition_rows_sum_to_the_parts(summary: dict[str, Any]) -> None:
    rows = [
        r
        for r in charts_gap.decomposition_rows(parse_summary(summary))
        if r["by"] == "confidence (trained)"
    ]
    deco = summary["families"]["trained"]["confidence"]
    for part in ("composition", "within", "out_of_support"):
        if deco[part]["value"] is None or deco[part].get("no_interval"):
            continue
        total = sum(r["value"] for r in rows if r["part"] == part)
        assert total == pytest.approx(100 * deco[part]["value"], abs=1e-6)


def test_speed_chart_has_measured_point_at_traced_k(summary: dict[str, Any]) -> None:
    spec = charts_speed.speed_chart(parse_summary(summary))
    rows = values(spec)
    for run in summary["runs"]:
        for lang, model in run["speed"]["by_lang"].items():
            mine = [r for r in rows if r["lang"] == lang and r["run"].startswith(run["label"])]
            measured = [r for r in mine if r["series"] == "measured"]
            assert [(r["k"], r["value"]) for r in measured] == [
                (model["traced_k"], pytest.approx(model["measured_tokens_per_step"]))
            ]
    assert spec["facet"]["column"]["field"] == "run"
    kinds = {u["mark"]["type"] for u in layers(spec)}
    assert kinds == {"line", "point"}


def test_all_charts_is_json_with_no_nan(summary: dict[str, Any]) -> None:
    specs = charts.all_charts(parse_summary(summary))
    assert {"acceptance", "by_script", "by_position_conditional", "gap", "speed"} <= set(specs)
    json.dumps(specs, allow_nan=False)


def test_acceptance_chart_is_per_run_never_pooled(summary: dict[str, Any]) -> None:
    """vLLM's rate depends on the method and k: one group per run, no "all runs"."""
    rows = values(charts.acceptance_chart(parse_summary(summary)))
    groups = {r["group"] for r in rows}
    assert "all runs" not in groups and len(groups) == len(summary["runs"])
    for run in summary["runs"]:
        mine = {r["lang"]: r["rate"] for r in rows if r["group"].startswith(run["label"] + " ")}
        assert mine == {k: pytest.approx(v["rate"]) for k, v in run["acceptance"].items()}


def test_position_charts_are_per_run(summary: dict[str, Any]) -> None:
    """One panel per run, each run's own positions and denominators."""
    spec = charts.position_chart(parse_summary(summary), "by_position", "t")
    rows = values(spec)
    assert spec["facet"]["field"] == "run"
    for run in summary["runs"]:
        for lang, block in run["by_position"].items():
            for p, stats in block.items():
                (row,) = [
                    r
                    for r in rows
                    if r["run"] == run["label"] and r["lang"] == lang and r["position"] == int(p)
                ]
                assert row["rate"] == pytest.approx(stats["rate"]) and row["n"] == stats["n"]


def test_class_gap_chart_leaves_one_language_classes_out(summary: dict[str, Any]) -> None:
    rows = charts.difference_rows(parse_summary(summary))
    assert rows
    for family, block in summary["classes"]["families"].items():
        for column, table in block["by"].items():
            for entry in table["classes"]:
                mine = [r for r in rows if r["by"] == column and r["class"] == entry["class"]]
                mine = [r for r in mine if r["family"].startswith(family.split("_")[0][:5])]
                if entry["status"] != "compared":
                    assert not mine
