"""Approximate (non-float32) replays: labelled, checked against a trace, refused unvouched."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tokenlens.analysis import AnalyzeConfig, run_analyze
from tokenlens.replay.trust import BOUND, agreement, exactness, unvouched, vouch
from tokenlens.rundir import read_run
from tokenlens.testing import SCENARIOS, simulate_study, write_study


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    root = tmp_path_factory.mktemp("sim")
    return write_study(simulate_study(SCENARIOS["h1_h2"], 12, seed=5), root)


def _as_replay(source: Path, dest: Path, dtype: str, flip: int = 0) -> Path:
    """A copy of ``source`` dressed as a replay in ``dtype``; ``flip`` accepted rows of
    English requests turned into rejections (with the rest of their step)."""
    shutil.copytree(source, dest)
    manifest = json.loads((dest / "manifest.json").read_text())
    manifest["replay"] = {"dtype": dtype, **exactness(dtype)}
    (dest / "manifest.json").write_text(json.dumps(manifest))
    if flip:
        ev = pq.read_table(dest / "events.parquet")
        req = pq.read_table(dest / "requests.parquet")
        en = {
            r
            for r, lang in zip(req["request_id"].to_pylist(), req["lang"].to_pylist(), strict=True)
            if lang.startswith("en")
        }
        acc = ev["accepted"].to_numpy(zero_copy_only=False).copy()
        rid = ev["request_id"].to_pylist()
        pos = ev["position"].to_numpy()
        picked = [i for i in range(len(acc)) if acc[i] and rid[i] in en and pos[i] == 0][:flip]
        for i in picked:  # reject the whole step: position 0 and the accepted rows after it
            j = i
            while j < len(acc) and rid[j] == rid[i] and (j == i or pos[j] > 0):
                acc[j] = False
                j += 1
        ev = ev.set_column(ev.schema.get_field_index("accepted"), "accepted", pa.array(acc))
        pq.write_table(ev, dest / "events.parquet")
    return dest


def _traced_in(source: Path, dest: Path, dtype: str) -> Path:
    shutil.copytree(source, dest)
    manifest = json.loads((dest / "manifest.json").read_text())
    manifest["dtype"] = dtype
    (dest / "manifest.json").write_text(json.dumps(manifest))
    return dest


def test_only_float32_replays_are_exact() -> None:
    assert exactness("float32") == {"exact": True, "approximate": None}
    assert exactness("torch.float32")["exact"]
    bf16 = exactness("bfloat16")
    assert not bf16["exact"] and "bfloat16" in bf16["approximate"]


def test_unvouched_reads_the_manifest() -> None:
    assert unvouched({"signature": "x"}) is None  # a trace
    assert unvouched({"replay": {"dtype": "float32", "exact": True}}) is None
    assert unvouched({"replay": {"dtype": "float32"}}) is None  # replays before the field
    approx = {"replay": {"dtype": "bfloat16", **exactness("bfloat16")}}
    assert "no check trace" in (unvouched(approx) or "")
    good = {**approx, "replay_check": {"agrees": True, "trace": "t"}}
    assert unvouched(good) is None
    bad = {**approx, "replay_check": {"agrees": False, "trace": "t", "max_abs_difference": 0.025}}
    assert "2.50 pp" in (unvouched(bad) or "")


def test_agreement_within_and_beyond_the_bound(study: list[Path], tmp_path: Path) -> None:
    source = study[0]
    traced = read_run(_traced_in(source, tmp_path / "trace", "bfloat16"))
    same = read_run(_as_replay(source, tmp_path / "same", "bfloat16"))
    check = agreement(traced, same)
    assert check["agrees"] and check["max_abs_difference"] == 0.0 and check["bound"] == BOUND
    other_dtype = read_run(_as_replay(source, tmp_path / "f32", "float32"))
    assert not agreement(traced, other_dtype)["agrees"]  # not the same dtype
    drifted = read_run(_as_replay(source, tmp_path / "drift", "bfloat16", flip=40))
    check = agreement(traced, drifted)
    assert not check["agrees"] and check["max_abs_difference"] > BOUND
    assert check["difference"]["en"] < 0 and check["difference"]["ja"] == 0.0


def test_the_study_gives_no_verdict_from_an_unvouched_replay(
    study: list[Path], tmp_path: Path
) -> None:
    plain = run_analyze(AnalyzeConfig(runs=tuple(study), out=tmp_path / "a", n_boot=50))
    assert all("refused" not in h for h in plain.summary["hypotheses"].values())
    replayed = [_as_replay(p, tmp_path / "r" / p.name, "bfloat16") for p in study]
    refused = run_analyze(AnalyzeConfig(runs=tuple(replayed), out=tmp_path / "b", n_boot=50))
    for name, h in refused.summary["hypotheses"].items():
        assert h["verdict"] == "inconclusive" and h["refused"], name
        assert h["evidence"].startswith("No verdict")
        assert h["effect"] == plain.summary["hypotheses"][name]["effect"]  # figures kept
    # A check trace at the same dtype that agrees vouches for every replay of its method.
    traces = [_traced_in(p, tmp_path / "t" / p.name, "bfloat16") for p in study]
    chosen = vouch(replayed, traces)
    assert chosen and all(c["agrees"] for c in chosen.values())
    vouched = run_analyze(AnalyzeConfig(runs=tuple(replayed), out=tmp_path / "c", n_boot=50))
    for name, h in vouched.summary["hypotheses"].items():
        assert h["verdict"] == plain.summary["hypotheses"][name]["verdict"]
        assert "refused" not in h
    assert np.isfinite([h["effect"] for h in vouched.summary["hypotheses"].values()]).all()
