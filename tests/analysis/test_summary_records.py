"""summary.json's families, h2_contrast, gap, hypotheses, rejections and runs[] as
records (issue 34, item 3).

Contract checked: each section of every committed summary reads into its record and
writes back byte for byte (keys, order, nulls); a record written and read back equals
itself; the analysis refuses to write a block its record does not declare; old
summaries still read into the same types.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from tests.support import REPO
from tokenlens.analysis.summary_fields import read, typed
from tokenlens.analysis.summary_file import load_summary
from tokenlens.analysis.summary_gaps import Contrast, Family, Gap
from tokenlens.analysis.summary_runs import RunSummary
from tokenlens.analysis.summary_sections import Rejections
from tokenlens.analysis.summary_verdicts import Hypothesis, Power, Sensitivity

COMMITTED = sorted((REPO / "reports").glob("**/summary.json"))
OLD = sorted((REPO / "tests" / "data" / "summaries").glob("*.json"))


def _text(value: Any) -> str:
    """As summary.json is written (rundir.write_json_atomic): order and nulls count."""
    return json.dumps(value, indent=2, ensure_ascii=False)


def _sections(raw: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """(where, record, what the file holds) for each new section of ``raw``."""
    out: list[tuple[str, Any, Any]] = [
        (f"families.{n}", read(Family, b, name=n), b) for n, b in raw["families"].items()
    ]
    out += [("h2_contrast", Contrast.parse(raw["h2_contrast"]), raw["h2_contrast"])]
    out += [("gap", Gap.parse(raw["gap"]), raw["gap"])]
    out += [(f"hypotheses.{n}", Hypothesis.parse(h), h) for n, h in raw["hypotheses"].items()]
    out += [("rejections", Rejections.parse(raw["rejections"]), raw["rejections"])]
    out += [(f"runs.{r['label']}", RunSummary.parse(r), r) for r in raw["runs"]]
    return out


@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: str(p.relative_to(REPO)))
def test_committed_sections_write_back_as_they_are(path: Path) -> None:
    raw = json.loads(path.read_text("utf-8"))
    for where, record, written in _sections(raw):
        assert record is not None, where
        assert _text(record.to_json()) == _text(written), where


@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: str(p.relative_to(REPO)))
def test_a_record_reads_back_as_written(path: Path) -> None:
    """write → read → equal, for every record of every new section (and the records
    inside them: splits, checks, power, sensitivity, speed models)."""
    raw = json.loads(path.read_text("utf-8"))
    for where, record, _ in _sections(raw):
        text = json.loads(_text(record.to_json()))
        again = (
            read(Family, text, name=record.name)
            if isinstance(record, Family)
            else type(record).parse(text)
        )
        assert again == record, where


def test_the_three_forms_of_power_and_an_uncomputed_sensitivity_round_trip() -> None:
    effect = Power(0.8, 60, "effect alone", se=0.01, mde=0.04, prompts_needed={"0.05": 30})
    conj = Power(
        0.8, 60, "conjunction: both", 0.01, 0.04, 0.02, 0.5, 0.05, {"0.05": 40}, {"0.05": 0.6}
    )
    not_read = Power(rule="conjunction", not_estimable="the control does not hold")
    for power in (effect, conj, not_read):
        assert Power.parse(json.loads(_text(power.to_json()))) == power
    assert list(effect.to_json())[-1] == "rule"
    assert list(conj.to_json())[2] == "rule"
    assert not_read.to_json() == {
        "not_estimable": "the control does not hold",
        "rule": "conjunction",
    }
    sens = Sensitivity(not_computed="no verdict to test")
    assert sens.to_json() == {"not_computed": "no verdict to test"}
    assert Sensitivity.parse(sens.to_json()) == sens


def test_a_hypothesis_read_by_its_rule_keeps_a_null_check() -> None:
    """H1 without a training-free run: ``check`` is null but written, after ``reading``."""
    h = Hypothesis(verdict="inconclusive", evidence="e", estimand="x", reading="na")
    written = h.to_json()
    assert written["check"] is None and list(written).index("check") == 1 + list(written).index(
        "reading"
    )
    assert Hypothesis.parse(json.loads(_text(written))) == h
    early = Hypothesis(verdict="inconclusive", evidence="e", reading="na")
    assert "check" not in early.to_json()


def test_the_analysis_refuses_a_key_its_record_does_not_declare() -> None:
    raw = json.loads(COMMITTED[0].read_text("utf-8"))
    block = dict(raw["gap"])
    assert typed(Gap, block) == Gap.parse(block)
    with pytest.raises(TypeError, match="Gap does not declare"):
        typed(Gap, {**block, "undeclared": 1})
    run = dict(raw["runs"][0])
    with pytest.raises(TypeError, match="RunSummary"):
        typed(RunSummary, {**run, "speed": {**run["speed"], "extra": True}})
    assert typed(Contrast, None) is None


def test_a_simulated_run_writes_no_manifest_keys() -> None:
    """A run without a manifest (the test bed) has no dtype/device/models/replay_source."""
    run = RunSummary(label="r", method="ngram", k=1, replayed=False)
    assert not {"dtype", "device", "models", "replay_source"} & set(run.to_json())
    assert RunSummary.parse(json.loads(_text(run.to_json()))) == run


@pytest.mark.parametrize("path", OLD, ids=lambda p: p.name)
def test_an_old_summary_reads_into_the_same_types(path: Path) -> None:
    s = load_summary(path)
    assert s.hypotheses and all(isinstance(h, Hypothesis) for h in s.hypotheses.values())
    assert all(isinstance(r, RunSummary) for r in s.runs) and s.runs
    assert all(dataclasses.is_dataclass(f) for f in s.families.values())
    raw = json.loads(path.read_text("utf-8"))
    for run, written in zip(s.runs, raw["runs"], strict=True):
        assert run.label == written["label"] and run.k == written["k"]
        assert set(run.speed_by_lang) == set(written["speed"]["by_lang"])
