"""summary.json's sections written by the types that read them.

Contract checked: the sections the analysis builds as records (``settings``,
``by_position`` at the top and per run, ``by_position_conditional``, ``classes``,
``domains``, ``margin_in_speed``)
are written back by their type byte for byte as the committed summaries hold them (keys,
order, nulls); a record read back equals the one built; every declared field of every
record has a reader; an older file without the newer keys reads them as None.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import pytest

from tests.support import REPO
from tokenlens.analysis import summary_fields
from tokenlens.analysis.bootstrap import estimate
from tokenlens.analysis.summary_fields import json_value
from tokenlens.analysis.summary_figures import Classes, LengthStandardised, PositionRate, Rate
from tokenlens.analysis.summary_file import Settings, SupportRules, load_summary
from tokenlens.analysis.summary_sections import Domains, MarginInSpeed

COMMITTED = sorted((REPO / "reports").glob("**/summary.json"))
OLD = sorted((REPO / "tests" / "data" / "summaries").glob("*.json"))


def _text(value: Any) -> str:
    """As summary.json is written (rundir.write_json_atomic): order and nulls count."""
    return json.dumps(value, indent=2, ensure_ascii=False)


def _positions(block: dict[str, Any], cls: type[Rate]) -> dict[str, dict[str, Rate | None]]:
    return {lang: {p: cls.parse(e) for p, e in groups.items()} for lang, groups in block.items()}


@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: str(p.relative_to(REPO)))
def test_committed_sections_write_back_as_they_are(path: Path) -> None:
    raw = json.loads(path.read_text("utf-8"))
    assert _text(Settings.parse(raw["settings"]).to_json()) == _text(raw["settings"])
    top = _positions(raw["by_position"], PositionRate)
    assert _text(json_value(top)) == _text(raw["by_position"])
    for run in raw["runs"]:
        for key, cls in (("by_position", PositionRate), ("by_position_conditional", Rate)):
            assert _text(json_value(_positions(run[key], cls))) == _text(run[key]), key
    margin = MarginInSpeed.parse(raw["margin_in_speed"])
    assert margin is not None and _text(margin.to_json()) == _text(raw["margin_in_speed"])
    if "domains" in raw:  # analyses without --prompts domains have none
        domains = Domains.parse(raw["domains"])
        assert domains is not None and _text(domains.to_json()) == _text(raw["domains"])
    if "classes" in raw:  # analyses without --details have none
        classes = Classes.parse(raw["classes"])
        assert classes is not None and _text(classes.to_json()) == _text(raw["classes"])


@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: str(p.relative_to(REPO)))
def test_a_committed_standardised_gap_reads_whole(path: Path) -> None:
    """What the typed view reads of ``gap_length_standardised`` is all the file holds,
    its pooled-over-k labels included."""
    raw = json.loads(path.read_text("utf-8"))
    s = load_summary(path)
    assert s.margin_in_speed is not None
    for name, block in raw["families"].items():
        written = block.get("gap_length_standardised")
        if written is None:
            continue
        figure = s.families[name].gap_length_standardised
        assert figure is not None
        assert _text(figure.to_json()) == _text(written)
        if figure.value is not None:
            assert set(figure.by_standard) == {"japanese", "english"}
    if raw.get("classes"):
        assert s.classes is not None and s.classes.declared == raw["classes"].get("declared")


def test_a_standardised_gap_without_a_value_writes_its_reason_and_method() -> None:
    figure = LengthStandardised(None, None, None, 0, not_estimable="no rows", method="direct")
    assert list(figure.to_json()) == ["value", "ci_low", "ci_high", "n", "not_estimable", "method"]
    assert LengthStandardised.parse(figure.to_json()) == figure


def test_settings_read_back_as_built() -> None:
    settings = Settings(
        seed=0,
        bootstrap=200,
        level=0.95,
        interval="t",
        cluster="prompt pair",
        clusters=30,
        min_count=30,
        confidence_bins=20,
        support=SupportRules(10, 3, 0.5),
        delta=0.02,
        alpha=0.05,
        decision_level=0.9,
        min_prompts=30,
        power=0.8,
        power_effects=(0.05, 0.1),
        control_range=0.06,
        rules_hash="abc",
    )
    written = json.loads(json.dumps(settings.to_json()))
    assert Settings.parse(written) == settings
    assert written["power_effects"] == [0.05, 0.1] and written["support"]["min_rows"] == 10


def test_a_position_rate_keeps_its_rate_and_reads_back() -> None:
    rate = Rate.of(estimate(0.5, 0.4, 0.6, 40), accepted=20, requests=9, sparse=False)
    at = PositionRate.from_rate(rate, per_draft=0.45, drafts=44)
    assert {k: v for k, v in at.to_json().items() if k not in ("per_draft", "drafts")} == (
        rate.to_json()
    )
    assert list(at.to_json())[-2:] == ["per_draft", "drafts"]
    assert PositionRate.parse(json.loads(json.dumps(at.to_json()))) == at
    # a position no step of the run reached per draft: written as null, not left out
    unknown = PositionRate.from_rate(rate, per_draft=None, drafts=0)
    assert unknown.to_json()["per_draft"] is None
    assert PositionRate.parse(unknown.to_json()) == unknown
    thin = Rate.of(estimate(1.0, math.nan, math.nan, 2), accepted=2, requests=1, sparse=True)
    assert PositionRate.parse(PositionRate.from_rate(thin, 0.1, 5).to_json()).no_interval  # type: ignore[union-attr]


# Fields whose value each record's own ``parse`` reads by hand (and passes to ``read``).
READ_BY_HAND = {
    ("Family", "name"),
    ("RunSummary", "replayed"),
    ("RunSummary", "models"),
}


def test_every_record_field_has_a_reader() -> None:
    """A field declared with a type no reader knows fails here, not in a user's report."""
    records = {n: c for n, c in summary_fields._PARSED.items() if dataclasses.is_dataclass(c)}
    assert {"Settings", "SupportRules", "PositionRate", "RunSummary"} <= set(records)
    unread = set()
    for name, cls in records.items():
        for f in dataclasses.fields(cls):
            try:
                summary_fields._reader(str(f.type))
            except TypeError:
                unread.add((name, f.name))
    assert unread == READ_BY_HAND


@pytest.mark.parametrize("path", OLD, ids=lambda p: p.name)
def test_an_old_file_reads_the_newer_keys_as_none(path: Path) -> None:
    s = load_summary(path)
    raw = json.loads(path.read_text("utf-8"))
    assert s.settings.seed == raw["settings"].get("seed")
    assert s.settings.power_effects == tuple(raw["settings"].get("power_effects") or ())
    for run in s.runs:
        for groups in run.by_position.values():
            for at in groups.values():
                assert isinstance(at, PositionRate)
    positions = s.breakdown("position")
    assert positions, "the old demo files have by_position"
    for lang, groups in positions.items():
        for p, at in groups.items():
            assert isinstance(at, PositionRate)
            assert at.per_draft == raw["by_position"][lang][p].get("per_draft")
            assert at.rate == raw["by_position"][lang][p].get("rate")
