"""Figures from per-request counts (:mod:`tokenlens.analysis.request_figures`): the
request-stats table of the committed full study's runs (60 prompt pairs; both drafter
families at k = 1..5, so pooled over k) gives the acceptance, judged-rows rate and class
breakdowns of summary.json of the same runs and settings, value for value, interval for
interval (the bootstrap draws the same clusters from the table's keys)."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from tests.support import REPO, assert_one_line_error, cli
from tokenlens.analysis import AnalyzeConfig, run_analyze
from tokenlens.analysis.request_figures import (
    FiguresConfig,
    figures,
    read_table,
    write_figures,
)
from tokenlens.analysis.request_gaps import LENGTH
from tokenlens.analysis.request_runs import POSITION
from tokenlens.analysis.request_stats import (
    BY,
    CONFIDENCE,
    StatsConfig,
    request_stats,
    request_stats_all,
)
from tokenlens.analysis.request_tables import differences
from tokenlens.errors import TokenlensError

RUNS = tuple(sorted(p for p in (REPO / "reports" / "full" / "runs").iterdir() if p.is_dir()))
SETTINGS = FiguresConfig(seed=3, n_boot=40, min_count=5)


@pytest.fixture(scope="module")
def analysed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo runs analysed with :data:`SETTINGS` (its tokens.parquet and summary.json)."""
    out = tmp_path_factory.mktemp("figures") / "analysis"
    config = AnalyzeConfig(
        runs=RUNS,
        out=out,
        seed=SETTINGS.seed,
        n_boot=SETTINGS.n_boot,
        min_count=SETTINGS.min_count,
        regression=False,
    )
    run_analyze(config)
    return out


def table_of(analysed: Path, by: str, out: Path) -> Path:
    pytest.importorskip("duckdb")
    request_stats(StatsConfig(str(analysed / "tokens.parquet"), str(out), by=by))
    return out


def summary(analysed: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((analysed / "summary.json").read_text("utf-8"))
    return loaded


FAMILY_FIGURES = (
    "methods",
    "runs",
    "configurations",
    "acceptance",
    "acceptance_judged",
    "prompts",
    "gap_judged",
    "gap_all",
)


@pytest.mark.parametrize("by", [b for b in BY if b not in (LENGTH, POSITION, CONFIDENCE)])
def test_figures_equal_the_analysis(analysed: Path, tmp_path: Path, by: str) -> None:
    stats, column = read_table(table_of(analysed, by, tmp_path / "s.parquet"))
    assert column == by
    got = figures(stats, by, SETTINGS)
    want = summary(analysed)
    scope = want["scope"]["family"]
    assert got["scope"] == scope
    assert got["settings"]["clusters"] == want["settings"]["clusters"] == 60
    assert got["settings"]["cluster"] == want["settings"]["cluster"]
    mine = got["families"][scope]
    name = got["breakdown"]
    assert mine[name] == want[name]
    assert mine["acceptance"] == want["acceptance"]
    assert mine["acceptance_judged"] == want["acceptance_judged"]
    assert mine["text_per_step"] == want["text_per_step"]
    assert set(got["families"]) == set(want["families"]) and len(got["families"]) == 2
    for fam, family in got["families"].items():  # the other family too
        for key in FAMILY_FIGURES:
            assert family[key] == want["families"][fam][key], (fam, key)
        assert "gap_length_standardised" not in family  # counted by byte length only
    for key in ("family", "overall", "judged", "relative_judged"):
        assert got["gap"][key] == want["gap"][key], key
    assert got["gap"]["decomposition"] == {}
    assert got["acceptance_per_k"] == want["acceptance_per_k"]
    assert got["margin_in_speed"] == want["margin_in_speed"]
    assert len(got["acceptance_per_k"][scope]) == 5  # k = 1..5, each apart
    # intervals were drawn, not left out, and the rates pooled over k say so
    assert any(r["ci_low"] is not None for r in mine[name]["ja"].values())
    assert mine["acceptance"]["ja"]["pooled_over_k"] == [1, 2, 3, 4, 5]


def test_every_family_byte_length_equals_the_analysis(analysed: Path, tmp_path: Path) -> None:
    stats, by = read_table(table_of(analysed, "bytes_bucket", tmp_path / "b.parquet"))
    got = figures(stats, by, SETTINGS)
    want = summary(analysed)
    for name, family in got["families"].items():
        assert family["by_byte_length"] == want["byte_length"][name]["rates"]


def test_counts_by_byte_length_give_the_length_standardised_gap(
    analysed: Path, tmp_path: Path
) -> None:
    """``--by n_bytes``: every family's length-standardised gap (its split, both
    standards) and the gap section's split by byte length, as the analysis wrote them;
    no class table (summary.json has none by exact byte length)."""
    stats, by = read_table(table_of(analysed, LENGTH, tmp_path / "n.parquet"))
    assert by == LENGTH
    got = figures(stats, by, SETTINGS)
    want = summary(analysed)
    assert got["breakdown"] is None
    for fam, family in got["families"].items():
        standardised = family["gap_length_standardised"]
        assert standardised == want["families"][fam]["gap_length_standardised"], fam
        assert standardised["by_standard"]["japanese"]["ci_low"] is not None
        assert family["gap_judged"] == want["families"][fam]["gap_judged"]
        assert not any(key.startswith("by_") for key in family)
    split = want["gap"]["decomposition"]["byte_length"]
    assert got["gap"]["decomposition"] == {"byte_length": split}
    assert got["gap"]["judged"] == want["gap"]["judged"]


RUN_FIGURES = ("acceptance", "acceptance_judged", "text_per_step", "gap", "relative_gap_judged")


@pytest.mark.parametrize("by", ["script", POSITION])
def test_every_run_equals_the_analysis(analysed: Path, tmp_path: Path, by: str) -> None:
    """Per run (one drafter and k, never pooled): the rates, text per step and gaps of
    summary.json's ``runs[]``; by position, its rates by draft position too (vLLM's
    per-draft rate, the steps, the conditional rate over the rows that reached p)."""
    stats, column = read_table(table_of(analysed, by, tmp_path / "r.parquet"))
    got = {block["run"]: block for block in figures(stats, column, SETTINGS)["runs"]}
    want = {run["label"]: run for run in summary(analysed)["runs"]}
    assert set(got) == set(want) and len(got) == 10
    for label, run in want.items():
        mine = got[label]
        assert (mine["method"], mine["k"]) == (run["method"], run["k"])
        for key in RUN_FIGURES:
            assert mine[key] == run[key], (label, key)
        if by == POSITION:
            assert mine["by_position"] == run["by_position"], label
            assert mine["by_position_conditional"] == run["by_position_conditional"], label
            assert len(mine["by_position"]["ja"]) == run["k"]
            assert mine["speed"] == run["speed"], label  # the families' assumed costs
            assert mine["speed"]["by_lang"]["ja"]["measured_tokens_per_step"] is not None
        else:
            assert "by_position" not in mine
    assert any(run["gap"]["ci_low"] is not None for run in got.values())


def test_counts_by_confidence_give_the_verdicts(analysed: Path, tmp_path: Path) -> None:
    """``--by confidence``: every family's split by the target's confidence, the H2
    contrast and both verdicts (their evidence, power, statement...) as the analysis
    wrote them; only the verdicts' sensitivity, which needs the rows, is left out."""
    stats, by = read_table(table_of(analysed, CONFIDENCE, tmp_path / "c.parquet"))
    got = figures(stats, by, SETTINGS)
    want = summary(analysed)
    assert got["breakdown"] is None
    for fam, family in got["families"].items():
        assert family["confidence"] == want["families"][fam]["confidence"], fam
        assert len(family["confidence"]["classes"]) == 20
    assert got["h2_contrast"] == want["h2_contrast"]
    for name, hypothesis in got["hypotheses"].items():
        written = {k: v for k, v in want["hypotheses"][name].items() if k != "sensitivity"}
        assert hypothesis == written, name
        assert hypothesis["evidence"] and hypothesis["power"]


def test_the_verdicts_read_the_rules_given(analysed: Path, tmp_path: Path) -> None:
    """Other rules (threshold, alpha, minimum prompts) reach the verdicts and the
    decision intervals as in the analysis' own functions over the same rows."""
    from tokenlens.analysis.bootstrap import Resampler
    from tokenlens.analysis.parts import compute_parts
    from tokenlens.analysis.summary_fields import json_value
    from tokenlens.analysis.verdicts import decide

    config = FiguresConfig(seed=3, n_boot=40, min_count=5, delta=0.001, alpha=0.2, min_prompts=61)
    stats, by = read_table(table_of(analysed, CONFIDENCE, tmp_path / "c.parquet"))
    got = figures(stats, by, config)["hypotheses"]
    tokens = pq.read_table(analysed / "tokens.parquet").to_pandas()
    rules = config.rules
    rs = Resampler.from_frame(tokens, 40, 3, decision_level=rules.decision_level)
    parts = compute_parts(tokens, rs, config.support, rules.control_range)
    want = {h: json_value(v) for h, v in decide(tokens, rs, rules, parts).items()}
    assert got == want
    assert {h["verdict"] for h in got.values()} == {"insufficient_data"}  # 60 < 61 prompts
    default = figures(stats, by, SETTINGS)["hypotheses"]["H1"]
    assert got["H1"]["decision_low"] != default["decision_low"]  # alpha 0.2, not 0.05


def test_every_table_at_once(analysed: Path, tmp_path: Path) -> None:
    """``request-stats --by all`` then ``request-figures`` of its directory: one study's
    figures, every table's own additions, each as summary.json holds it."""
    pytest.importorskip("duckdb")
    counts = tmp_path / "counts"
    status, stdout, err = cli(
        ["request-stats", str(analysed / "tokens.parquet"), "--by", "all", "--out", str(counts)]
    )
    assert status == 0, err
    assert "a table per class column" in stdout
    out = tmp_path / "all.json"
    argv = ["request-figures", str(counts), "--out", str(out), "--seed", "3"]
    status, _, err = cli([*argv, "--bootstrap", "40", "--min-count", "5"])
    assert status == 0, err
    got = json.loads(out.read_text("utf-8"))
    want = summary(analysed)
    scope = got["scope"]
    assert got["by"] == list(BY)
    for name in got["breakdown"]:
        assert got["families"][scope][name] == want[name], name
    assert len(got["breakdown"]) == 7
    for fam, family in got["families"].items():
        for key in (*FAMILY_FIGURES, "confidence", "gap_length_standardised"):
            assert family[key] == want["families"][fam][key], (fam, key)
        assert family["by_byte_length"] == want["byte_length"][fam]["rates"]
    for key in ("acceptance_per_k", "h2_contrast", "margin_in_speed"):
        assert got[key] == want[key]
    assert got["gap"]["decomposition"]["byte_length"] == want["gap"]["decomposition"]["byte_length"]
    for name, hypothesis in got["hypotheses"].items():  # with their sensitivity, per k too
        assert hypothesis == want["hypotheses"][name], name
        assert len(hypothesis["sensitivity"]["per_k"]) == 5
    runs = {run["label"]: run for run in want["runs"]}
    for run in got["runs"]:
        for key in (*RUN_FIGURES, "by_position", "by_position_conditional", "speed"):
            assert run[key] == runs[run["run"]][key], (run["run"], key)


def test_differences_names_every_figure_that_differs(analysed: Path, tmp_path: Path) -> None:
    """``differences`` (what the bench reports) is empty for the combined figures, and
    names a figure changed in any of the places it compares."""
    counts = tmp_path / "counts"
    request_stats_all(StatsConfig(str(analysed / "tokens.parquet"), str(counts), by="all"))
    got = write_figures(counts, tmp_path / "f.json", SETTINGS)
    want = summary(analysed)
    assert differences(got, want) == []
    scope = got["scope"]
    changed = [
        ("by_pos", lambda w: w["by_pos"]["ja"].popitem()),
        (f"families.{scope}.gap_judged", lambda w: w["families"][scope]["gap_judged"].update(n=1)),
        ("hypotheses", lambda w: w["hypotheses"]["H2"].update(verdict="supported")),
        (
            "gap.decomposition.byte_length",
            lambda w: w["gap"]["decomposition"]["byte_length"].clear(),
        ),
        ("margin_in_speed", lambda w: w["margin_in_speed"].update(basis="")),
    ]
    for path, change in changed:
        tampered = copy.deepcopy(want)
        change(tampered)
        assert differences(got, tampered) == [path], path
    run = got["runs"][0]["run"]
    tampered = copy.deepcopy(want)
    next(r for r in tampered["runs"] if r["label"] == run)["speed"]["draft_cost"] = 9.0
    assert differences(got, tampered) == [f"runs[{run}].speed"]


def test_tables_of_other_rows_are_refused(analysed: Path, tmp_path: Path) -> None:
    """A table counted from other rows (here: one run fewer) among the others: refused in
    one line, nothing written."""
    pytest.importorskip("duckdb")
    counts = tmp_path / "counts"
    request_stats_all(StatsConfig(str(analysed / "tokens.parquet"), str(counts), by="all"))
    tokens = pq.read_table(analysed / "tokens.parquet")
    first = tokens.column("run")[0].as_py()
    fewer = tokens.filter(pc.not_equal(tokens.column("run"), first))
    pq.write_table(fewer, tmp_path / "fewer.parquet")
    (counts / "pos.parquet").unlink()
    request_stats(
        StatsConfig(str(tmp_path / "fewer.parquet"), str(counts / "pos.parquet"), by="pos")
    )
    with pytest.raises(TokenlensError, match="not counted from the same rows"):
        write_figures(counts, tmp_path / "f.json", SETTINGS)
    assert not (tmp_path / "f.json").exists()


def test_a_draft_cost_given_is_the_speed_model_s(analysed: Path, tmp_path: Path) -> None:
    """``--draft-cost``, as in analyze: every run's speed model uses it, labelled so."""
    stats, by = read_table(table_of(analysed, POSITION, tmp_path / "p.parquet"))
    given = FiguresConfig(seed=3, n_boot=40, min_count=5, draft_cost=0.5)
    runs = figures(stats, by, given)["runs"]
    default = {r["run"]: r["speed"] for r in figures(stats, by, SETTINGS)["runs"]}
    for run in runs:
        speed = run["speed"]
        assert (speed["draft_cost"], speed["draft_cost_source"]) == (0.5, "option")
        assert speed["draft_cost_measured"] is True
        assert speed["by_lang"] != default[run["run"]]["by_lang"]


def test_another_seed_gives_other_intervals(analysed: Path, tmp_path: Path) -> None:
    """The equality above rests on the same draws: another seed must change them."""
    stats, by = read_table(table_of(analysed, "script", tmp_path / "s.parquet"))
    other = figures(stats, by, FiguresConfig(seed=4, n_boot=40, min_count=5))
    scope = other["scope"]
    assert other["families"][scope]["by_script"] != summary(analysed)["by_script"]


def test_without_pairs_clusters_are_prompts_by_language(analysed: Path, tmp_path: Path) -> None:
    """Requests without a prompt pair: clusters are prompts, stratified by language, as
    the analysis makes them (its frame rule, applied here to the analysis' own rows)."""
    from tokenlens.analysis.bootstrap import Resampler
    from tokenlens.analysis.breakdown import per_lang, rates, row_mask, text_per_step
    from tokenlens.analysis.gap import gap

    stats, by = read_table(table_of(analysed, "script", tmp_path / "s.parquet"))
    unpaired = stats.assign(pair=None)
    got = figures(unpaired, by, SETTINGS)
    tokens = pq.read_table(analysed / "tokens.parquet").to_pandas().assign(pair=None)
    rs = Resampler.from_frame(tokens, SETTINGS.n_boot, SETTINGS.seed)
    assert got["settings"]["cluster"] == rs.unit == "prompt (stratified by language)"
    assert got["settings"]["clusters"] == rs.n_clusters == 120
    scope = got["scope"]
    rows = tokens["family"].to_numpy() == scope
    judged = row_mask(tokens, "judged") & rows
    mine = got["families"][scope]
    assert mine["acceptance"] == label(per_lang(tokens, rs, rows, SETTINGS.min_count), scope)
    want_judged = per_lang(tokens, rs, judged, SETTINGS.min_count)
    assert mine["acceptance_judged"] == label(want_judged, scope)
    assert mine["by_script"] == rates(tokens, rs, "script", judged, SETTINGS.min_count)
    steps = text_per_step(tokens, rs, rows)
    assert mine["text_per_step"] == {lang: label(per, scope) for lang, per in steps.items()}
    labels = {"pooled_over_k": [1, 2, 3, 4, 5], "family": scope}
    assert mine["gap_judged"] == {**gap(tokens, rs, judged), **labels}
    assert mine["gap_all"] == {**gap(tokens, rs, rows), **labels}


def label(block: dict[str, Any], family: str) -> dict[str, Any]:
    """Rates of the full study's families as summary.json labels them (pooled over k)."""
    return {
        lang: {**r, "pooled_over_k": [1, 2, 3, 4, 5], "family": family} for lang, r in block.items()
    }


def test_the_command_writes_once_and_refuses_in_one_line(analysed: Path, tmp_path: Path) -> None:
    table = table_of(analysed, "pos", tmp_path / "p.parquet")
    out = tmp_path / "figures.json"
    argv = ["request-figures", str(table), "--out", str(out), "--seed", "3", "--bootstrap", "40"]
    status, stdout, err = cli([*argv, "--min-count", "5"])
    assert status == 0, err
    assert str(out) in stdout
    written = json.loads(out.read_text("utf-8"))
    assert written["families"][written["scope"]]["by_pos"] == summary(analysed)["by_pos"]
    before = out.read_bytes()
    status, _, err = cli(argv)
    assert_one_line_error(status, err, "exists")
    assert out.read_bytes() == before
    status, _, err = cli(["request-figures", str(analysed / "tokens.parquet"), "--out", "x.json"])
    assert_one_line_error(status, err, "not a table of `tokenlens request-stats`")
    status, _, err = cli(["request-figures", str(tmp_path / "none"), "--out", "x.json"])
    assert_one_line_error(status, err, "no such file or directory")


def test_a_table_of_an_older_request_stats_is_refused(analysed: Path, tmp_path: Path) -> None:
    old = pq.read_table(table_of(analysed, "script", tmp_path / "a.parquet"))
    pq.write_table(old.drop_columns(["class_column"]), tmp_path / "old.parquet")
    with pytest.raises(TokenlensError, match="older request-stats"):
        read_table(tmp_path / "old.parquet")


def test_a_table_of_two_class_columns_is_refused(analysed: Path, tmp_path: Path) -> None:
    a = pq.read_table(table_of(analysed, "script", tmp_path / "a.parquet")).to_pandas()
    b = pq.read_table(table_of(analysed, "pos", tmp_path / "b.parquet")).to_pandas()
    both = tmp_path / "both.parquet"
    pd.concat([a, b]).to_parquet(both)
    with pytest.raises(TokenlensError, match="one table counts by one class column"):
        write_figures(both, tmp_path / "f.json", SETTINGS)
    assert not (tmp_path / "f.json").exists()


@pytest.mark.spark
@pytest.mark.skipif(shutil.which("java") is None, reason="Spark needs a Java runtime (17+)")
def test_a_spark_directory_gives_the_analysis_figures(analysed: Path, tmp_path: Path) -> None:
    """``request-stats --engine spark --by all`` (local mode, the engine a cluster runs):
    its directories of parts read as one study give summary.json's figures, the verdicts
    with each k's own bins included."""
    pytest.importorskip("pyspark")
    counts = tmp_path / "spark"
    config = StatsConfig(str(analysed / "tokens.parquet"), str(counts), engine="spark", by="all")
    request_stats_all(config)
    got = write_figures(counts, tmp_path / "f.json", SETTINGS)
    assert differences(got, summary(analysed)) == []
    assert len(got["hypotheses"]["H1"]["sensitivity"]["per_k"]) == 5


def test_a_real_positive_control_read_from_its_counts(tmp_path: Path) -> None:
    """The H200 positive control (reports/gpu/control, third run): a drafter trained on
    no Japanese against the n-gram drafter, real weights, 60 prompt pairs. From its
    counts alone every figure equals the analysis', and the verdicts find the planted
    cause as the analysis does: H2 supported, H1 not."""
    pytest.importorskip("duckdb")
    control = REPO / "reports" / "gpu" / "control" / "run3" / "runs"
    config = AnalyzeConfig(
        runs=(control / "ja000", control / "ngram"),
        out=tmp_path / "analysis",
        n_boot=200,
        regression=False,
    )
    run_analyze(config)
    tokens = tmp_path / "analysis" / "tokens.parquet"
    request_stats_all(StatsConfig(str(tokens), str(tmp_path / "counts"), by="all"))
    got = write_figures(tmp_path / "counts", tmp_path / "f.json", FiguresConfig(n_boot=200))
    assert differences(got, summary(tmp_path / "analysis")) == []
    verdicts = {name: h["verdict"] for name, h in got["hypotheses"].items()}
    assert verdicts == {"H1": "not_supported", "H2": "supported"}
