"""Acceptance by the emitted token's UTF-8 byte length, per drafter family and language,
and text per step in bytes, on the hand-built runs of test_positions.py.

Judged rows by hand (tests/analysis/handbuilt.py: 私は 6 bytes, 昨日 6, 、 3, 東 3, 京 3,
の 3; The 3, " quick" 6, " brown" 6, " jumps" 6):

- ngram-k3, Japanese: 私は ✓ 昨日 ✓ 、 ✗ 東 ✗ 京 ✓ の ✗ -> 6 bytes 2/2, 3 bytes 1/4;
  English: The ✓ quick ✓ brown ✓ jumps ✗ -> 3 bytes 1/1, 6 bytes 2/3.
- draft_model-k1, Japanese: 私は ✓ 、 ✗ 東 ✓ の ✗ -> 6 bytes 1/1, 3 bytes 1/3;
  English: The ✓ brown ✓ jumps ✗ -> 3 bytes 1/1, 6 bytes 1/2.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.analysis.handbuilt import write_run
from tests.analysis.test_positions import DRAFT_K1, NGRAM_K3
from tokenlens.analysis import AnalyzeConfig, run_analyze
from tokenlens.analysis.join import BYTE_LABELS
from tokenlens.report.tables import write_tables


@pytest.fixture(scope="module")
def analysed(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path]:
    root = tmp_path_factory.mktemp("bytes")
    runs = (
        write_run(root / "ngram-k3", "ngram", 3, NGRAM_K3),
        write_run(root / "draft_model-k1", "draft_model", 1, DRAFT_K1),
    )
    out = root / "out"
    run_analyze(AnalyzeConfig(runs=runs, out=out, n_boot=30, min_count=1))
    write_tables(out)
    return json.loads((out / "summary.json").read_text("utf-8")), out


def rate(block: dict[str, Any], lang: str, bucket: str) -> tuple[float, int]:
    entry = block["rates"][lang][bucket]
    return entry["rate"], entry["n"]


def test_labels() -> None:
    assert BYTE_LABELS[:4] == ["0", "1", "2", "3"] and BYTE_LABELS[-2:] == ["10-12", ">=13"]


def test_per_family_and_language_by_hand(analysed: tuple[dict[str, Any], Path]) -> None:
    summary, _ = analysed
    free, trained = summary["byte_length"]["training_free"], summary["byte_length"]["trained"]
    assert free["runs"] == ["ngram-k3"] and trained["runs"] == ["draft_model-k1"]
    assert rate(free, "ja", "6") == (pytest.approx(1.0), 2)
    assert rate(free, "ja", "3") == (pytest.approx(0.25), 4)
    assert rate(free, "en", "3") == (pytest.approx(1.0), 1)
    assert rate(free, "en", "6") == (pytest.approx(2 / 3), 3)
    assert rate(trained, "ja", "6") == (pytest.approx(1.0), 1)
    assert rate(trained, "ja", "3") == (pytest.approx(1 / 3), 3)
    assert rate(trained, "en", "6") == (pytest.approx(0.5), 2)
    assert set(free["rates"]["ja"]) == {"3", "6"}  # no row, no bucket
    # the top-level breakdown is the scope family's (trained drafters here)
    assert summary["by_byte_length"]["ja"]["3"]["n"] == 3


def test_tables_show_bytes(analysed: tuple[dict[str, Any], Path]) -> None:
    _, out = analysed
    tables = (out / "tables.md").read_text("utf-8")
    assert "## Acceptance by token byte length" in tables
    assert "| 3 | 0.250" in tables  # n-gram, Japanese, 3 bytes: 1 of 4
    assert "ja bytes/step" in tables
