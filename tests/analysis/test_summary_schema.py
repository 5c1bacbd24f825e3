"""One type per figure of summary.json, for writing and reading.

Contract checked: the records the analysis builds (``Estimate``, ``Rate``, ``Share`` of
:mod:`tokenlens.analysis.summary_figures`) read back from their JSON as the same
record, and every such figure in the committed summaries is written back by its type
exactly as the file holds it (nothing the reader drops, nothing the writer adds).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from tests.support import REPO
from tokenlens.analysis.bootstrap import estimate, missing
from tokenlens.analysis.summary_figures import Estimate, Rate, Share
from tokenlens.analysis.summary_file import Scope
from tokenlens.analysis.token_classes import TOKEN_CLASSES

BREAKDOWNS = {c.breakdown for c in TOKEN_CLASSES if c.breakdown}
COMMITTED = sorted((REPO / "reports").glob("**/summary.json"))


@pytest.mark.parametrize(
    "figure",
    [
        estimate(-0.05, -0.08, -0.02, 40),
        estimate(0.3, math.nan, 0.4, 3),  # a value without an interval says why
        estimate(math.nan, math.nan, math.nan, 0),  # no value says why
        estimate(0.1, 0.0, 0.2, 9, "given reason"),
        Estimate(0.1, 0.0, 0.2, 9, decision_low=-0.01, decision_high=0.21),
    ],
)
def test_an_estimate_reads_back_as_built(figure: Estimate) -> None:
    assert Estimate.parse(figure.to_json()) == figure
    assert Estimate.parse(missing("no pairs", 4)) == Estimate(None, None, None, 4, "no pairs")


def test_rates_and_shares_read_back_as_built() -> None:
    rate = Rate.of(estimate(0.6, 0.5, 0.7, 50), accepted=30, requests=12, sparse=False)
    assert Rate.parse(rate.to_json()) == rate
    thin = Rate.of(estimate(1.0, math.nan, math.nan, 2), accepted=2, requests=1, sparse=True)
    assert Rate.parse(thin.to_json()) == thin and thin.no_interval
    share = Share.of(estimate(0.25, 0.1, 0.4, 8), count=2)
    assert Share.parse(share.to_json()) == share


def _rates(summary: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """The rates of the class breakdowns (``by_script`` ...: :class:`Rate` records)."""
    for key, block in summary.items():
        if key in BREAKDOWNS and isinstance(block, Mapping):
            for groups in block.values():
                if isinstance(groups, Mapping):
                    yield from (g for g in groups.values() if isinstance(g, dict) and "rate" in g)


@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: str(p.relative_to(REPO)))
def test_committed_figures_write_back_as_they_are(path: Path) -> None:
    summary = json.loads(path.read_text("utf-8"))
    rates = list(_rates(summary))
    assert rates
    for entry in rates:
        assert Rate.parse(entry).to_json() == entry  # type: ignore[union-attr]
    hypotheses = summary["hypotheses"].values()
    for h in hypotheses:
        check = (h.get("check") or {}).get("effect")
        if isinstance(check, dict) and "value" in check:
            assert Estimate.parse(check).to_json() == check  # type: ignore[union-attr]


@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: str(p.relative_to(REPO)))
def test_a_committed_scope_writes_back_as_it_is(path: Path) -> None:
    """``scope`` is built as a :class:`Scope` record and written by the generic writer."""
    raw = json.loads(path.read_text("utf-8")).get("scope")
    if not raw:
        pytest.skip("written before scope")
    assert Scope.parse(raw).to_json() == raw  # type: ignore[union-attr]
