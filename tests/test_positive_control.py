"""The positive control's data preparation and bookkeeping (benchmarks/positive_control.py):
training prompts and their overlap check, the exact token split per share, packing, a
fine-tune of a tiny model on the CPU, and study.json from hand-made analysis outputs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from benchmarks.control_kit import mixing
from benchmarks.control_kit import prompts as P
from benchmarks.control_kit.study import build_study, checks, drafter_entry

ROOT = Path(__file__).resolve().parent.parent


def test_prompts_are_deterministic_parallel_and_share_nothing_with_the_evaluation() -> None:
    a, b = P.build(0), P.build(0)
    assert a == b and a != P.build(1)
    assert (
        len({p["id"] for p in a}) == len(a) == 2 * len(P.TEMPLATES) * len(P.TOPICS) * len(P.FORMATS)
    )
    pairs: dict[str, set[str]] = {}
    for p in a:
        pairs.setdefault(p["pair"], set()).add(p["lang"])
    assert all(v == {"ja", "en"} for v in pairs.values())
    kept, report = P.prepare(ROOT)
    assert (
        report["evaluation_prompts"] > 200
        and "reports/full/prompts.jsonl" in report["evaluation_files"]
    )
    assert report["overlapping"] == 0 and len(kept) == report["built"] == len(a)


def _prompt(pid: str, lang: str, pair: str, text: str) -> dict[str, Any]:
    return {"id": pid, "lang": lang, "pair": pair, "messages": [{"role": "user", "content": text}]}


def test_a_planted_overlap_is_dropped_with_its_pair() -> None:
    ja_eval = "在宅勤務になってから運動不足が気になっています。"
    en_eval = "Explain how to start PostgreSQL sixteen locally with Docker and keep data."
    evals = [_prompt("e1", "ja", "e", ja_eval), _prompt("e2", "en", "e", en_eval)]
    train = [
        _prompt("a-ja", "ja", "a", "友人は" + ja_eval[3:15] + "と言う。"),  # 12 shared chars
        _prompt("a-en", "en", "a", "A harmless English partner."),
        _prompt("b-ja", "ja", "b", "友人は" + ja_eval[3:14] + "と言う。"),  # 11: kept
        _prompt("b-en", "en", "b", "Please start PostgreSQL sixteen locally with Docker and go."),
        _prompt("c-ja", "ja", "c", "全く別の話題です。"),
        _prompt(
            "c-en",
            "en",
            "c",
            "Now explain how to start PostgreSQL sixteen locally with Docker, thanks.",
        ),  # 8 shared words
        _prompt("d-en", "en", "d", en_eval),  # exact
    ]
    kept, report = P.drop_overlaps(train, evals)
    assert [p["id"] for p in kept] == ["b-ja", "b-en"]
    assert report["overlapping_by_rule"] == {"12_chars": 1, "8_words": 1, "exact": 1}
    assert report["dropped_pairs"] == 3


def _pools(seed: int = 0) -> dict[str, list[mixing.Example]]:
    rng = np.random.default_rng(seed)
    return {
        lang: [
            mixing.Example(
                lang,
                tuple(rng.integers(10, 1000, 5).tolist()),
                tuple(rng.integers(10, 1000, int(rng.integers(3, 20))).tolist()),
            )
            for _ in range(60)
        ]
        for lang in ("ja", "en")
    }


@pytest.mark.parametrize("share", [0.0, 0.3, 0.5, 1.0])
def test_each_share_gets_the_exact_token_split_and_loss_only_on_answers(share: float) -> None:
    pools = _pools()
    n = 301
    examples = mixing.mix(pools, share, n, seed=0)
    ja = round(share * n)
    assert sum(len(e.answer_ids) for e in examples if e.lang == "ja") == ja
    assert sum(len(e.answer_ids) for e in examples if e.lang == "en") == n - ja
    packed = mixing.pack(examples, 64, pad_id=0)
    assert (packed.tokens("ja"), packed.tokens("en"), packed.tokens()) == (ja, n - ja, n)
    # the loss positions' next tokens, row by row, are exactly the answers in packing order
    nxt = np.roll(packed.input_ids, -1, axis=1)[packed.loss_mask]
    assert nxt.tolist() == [t for e in examples for t in e.answer_ids]
    # position ids restart at 0 for every example (and for a row's padding, if it has any)
    zeros = int((packed.position_ids == 0).sum())
    assert len(examples) <= zeros <= len(examples) + packed.input_ids.shape[0]


def test_every_share_reads_the_same_examples_in_front_of_each_pool() -> None:
    pools = _pools()
    half = [e.prompt_ids for e in mixing.mix(pools, 0.5, 200, 0) if e.lang == "ja"]
    full = [e.prompt_ids for e in mixing.mix(pools, 1.0, 200, 0) if e.lang == "ja"]
    # the same Japanese examples, in the pool's order, the smaller share's a prefix
    assert full[: len(half)] == half == [e.prompt_ids for e in pools["ja"][: len(half)]]
    langs = [e.lang for e in mixing.mix(pools, 0.5, 200, 0)]
    assert langs != sorted(langs) and langs != sorted(langs, reverse=True)  # interleaved
    with pytest.raises(ValueError, match="fewer than"):
        mixing.mix(pools, 1.0, 10**6, 0)


@pytest.fixture
def tiny_drafter(tmp_path: Path) -> Path:
    """tokenlens' tiny Qwen3 made narrower (32 wide: seconds on a busy CPU) with seeded
    random weights, saved as a drafter directory with the tiny model's tokenizer files."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from tokenlens.models.tiny import ensure_tiny

    src = ensure_tiny("tiny-qwen3", tmp_path / "cache")
    config = AutoConfig.from_pretrained(str(src))
    config.update({"hidden_size": 32, "intermediate_size": 64, "head_dim": 16})
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config)
    out = tmp_path / "drafter"
    model.save_pretrained(str(out))
    for f in src.iterdir():
        if f.name.startswith(("tokenizer", "chat_template", "generation_config")):
            (out / f.name).write_bytes(f.read_bytes())
    return out


def test_a_tiny_finetune_saves_a_loadable_drafter_with_its_hash(
    tiny_drafter: Path, tmp_path: Path
) -> None:
    from transformers import AutoModelForCausalLM

    from benchmarks.control_kit.finetune import TrainConfig, sha256, train

    # learnable answers (a fixed cycle of ids), so that a few steps must lower the loss
    pools = {
        lang: [
            mixing.Example(
                lang, e.prompt_ids, tuple(100 + (i % 7) for i in range(len(e.answer_ids)))
            )
            for e in pool
        ]
        for lang, pool in _pools().items()
    }
    packed = mixing.pack(mixing.mix(pools, 0.5, 240, 0), 64, pad_id=0)
    cfg = TrainConfig(lr=1e-2, rows_per_step=2, micro_rows=1, seq_len=64, log_every=1)
    rec = train(tiny_drafter, packed, tmp_path / "ja050", cfg)
    out = tmp_path / "ja050"
    assert rec["weights"]["sha256"] == sha256(out / "model.safetensors")
    assert rec["tokens_seen"] == {"ja": 120, "en": 120, "total": 240}
    assert rec["steps"] == len(rec["loss_curve"]) == -(-packed.input_ids.shape[0] // 2)
    assert rec["packing_check"]["passed"] and rec["packing_check"]["max_abs_diff"] < 1e-4
    assert rec["precision"] == "float32" and rec["config"]["seed"] == 0
    assert rec["loss_curve"][-1]["loss"] < rec["loss_curve"][0]["loss"]
    for name in ("config.json", "generation_config.json", "tokenizer.json"):
        assert (out / name).exists()
    assert json.loads((out / "config.json").read_text())["dtype"] == "bfloat16"
    model = AutoModelForCausalLM.from_pretrained(str(out))
    assert model.config.vocab_size == 151936
    # the same seed and data give the same weights
    again = train(tiny_drafter, packed, tmp_path / "again", cfg)
    assert again["weights"]["sha256"] == rec["weights"]["sha256"]


def _summary(gap: float, h2: str, length: bool = False) -> dict[str, Any]:
    iv = {
        "value": gap,
        "ci_low": gap - 0.02,
        "ci_high": gap + 0.02,
        "decision_low": gap - 0.015,
        "decision_high": gap + 0.015,
        "n": 1000,
    }
    rate = {"rate": 0.6, "ci_low": 0.55, "ci_high": 0.65, "n": 5000}
    s: dict[str, Any] = {
        "settings": {"rules_hash": "abc", "delta": 0.02},
        "prompts": {"ja": 60, "en": 60},
        "families": {
            "trained": {
                "acceptance": {"ja": rate, "en": rate},
                "acceptance_judged": {
                    "ja": {**rate, "rate": 0.7 + gap},
                    "en": {**rate, "rate": 0.7},
                },
            }
        },
        "gap": {"judged": iv},
        "h2_contrast": {"within_trained": iv, "within_training_free": {**iv, "value": 0.19}},
        "hypotheses": {
            "H1": {"verdict": "no_japanese_deficit", "effect": 0.01},
            "H2": {"verdict": h2, "effect": -0.2, "check": {**iv, "reading": "yes"}},
        },
    }
    if length:
        s["gap"]["judged_length_standardised"] = {**iv, "value": gap - 0.01}
    return s


def test_study_json_from_fake_analyses(tmp_path: Path) -> None:
    runs, analyses = tmp_path / "runs", tmp_path / "analyses"
    cases = {
        "untuned": (0.01, "no_japanese_deficit", None),
        "ja000": (-0.08, "supported", 0.0),
        "ja050": (-0.03, "inconclusive", 0.5),
        "ja100": (0.02, "no_japanese_deficit", 1.0),
    }
    records: dict[str, Any] = {
        "commit": {"value": "c0ffee"},
        "tokens_per_drafter": 1000,
        "drafters": {},
    }
    for name, (gap, h2, share) in cases.items():
        (runs / name).mkdir(parents=True)
        (analyses / name).mkdir(parents=True)
        (analyses / name / "summary.json").write_text(
            json.dumps(_summary(gap, h2, length=name == "ja000"))
        )
        (runs / name / "manifest.json").write_text(
            json.dumps(
                {
                    "status": "complete",
                    "reconciliation": {"exact": True},
                    "engine": {"device": {"name": "NVIDIA H200"}, "dtype": "bfloat16"},
                }
            )
        )
        if share is not None:
            records["drafters"][name] = {
                "share": share,
                "steps": 3,
                "tokens_seen": {"ja": 1000 * share},
                "weights": {"sha256": f"sha-{name}"},
                "loss_curve": [{"loss": 2.0}, {"loss": 1.5}],
            }
    study = build_study(records, runs, analyses, list(cases))
    by = {e["name"]: e for e in study["drafters"]}
    assert by["ja000"]["training"]["weights_sha256"] == "sha-ja000"
    assert by["untuned"]["share_ja"] is None and by["untuned"]["training"] is None
    assert by["ja000"]["run"]["device"] == "NVIDIA H200"
    assert by["ja000"]["analysis"]["gap_length_standardised"]["value"] == pytest.approx(-0.09)
    assert by["ja050"]["analysis"]["gap_length_standardised"]["value"] is None
    assert "reason" in by["ja050"]["analysis"]["gap_length_standardised"]
    c = study["checks"]
    assert c["gap_judged_ordered_with_share"] is True
    assert c["planted_deficit_found"]["value"] is True
    assert c["manipulation"]["share_0_en_judged_minus_untuned"] == pytest.approx(0.0)
    assert study["control_run"] is None  # no n-gram run directory here
    assert study["gap_differences"]["value"] is None  # no tokens.parquet here
    assert "untuned" in study["gap_differences"]["reason"]
    # a 0% drafter whose interval reaches −δ is not counted as found
    weak = drafter_entry("ja000", {"share": 0.0}, _summary(-0.03, "supported"), None)
    assert weak["run"]["value"] is None
    assert checks([weak])["planted_deficit_found"]["value"] is False
    study2 = build_study(records, runs, analyses, ["untuned", "ja050", "ja100"])
    assert study2["checks"]["planted_deficit_found"]["value"] is None


def test_the_prompts_stage_from_the_command_line(tmp_path: Path) -> None:
    subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "positive_control.py"),
            "prompts",
            "--work",
            str(tmp_path),
            "--prompts-per-lang",
            "7",
        ],
        check=True,
        capture_output=True,
    )
    lines = (tmp_path / "training" / "prompts.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(x)["lang"] for x in lines] == ["ja"] * 7 + ["en"] * 7
    check = json.loads((tmp_path / "training" / "prompts_check.json").read_text())
    assert check["overlapping"] == 0 and check["written_per_lang"] == {"ja": 7, "en": 7}


def test_the_packing_check_sees_examples_that_attend_to_each_other(
    tiny_drafter: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch
    import transformers.masking_utils as mu
    from transformers import AutoModelForCausalLM

    from benchmarks.control_kit.finetune import packing_check

    model = AutoModelForCausalLM.from_pretrained(str(tiny_drafter), dtype=torch.float32)
    packed = mixing.pack(mixing.mix(_pools(), 0.5, 60, 0), 128, pad_id=0)
    assert packing_check(model, packed, torch.device("cpu"))["passed"] is True
    # without the block mask built from the restarting position ids, the check must fail
    monkeypatch.setattr(mu, "find_packed_sequence_indices", lambda position_ids: None)
    leak = packing_check(model, packed, torch.device("cpu"))
    assert leak["checked"] and leak["passed"] is False


def test_parallel_jobs_end_or_are_stopped_at_the_deadline(tmp_path: Path) -> None:
    import time

    from benchmarks.control_kit.traces import Job, run_parallel

    jobs = [
        Job("quick", [sys.executable, "-c", "print('hi')"], tmp_path / "q.log", {}),
        Job("slow", [sys.executable, "-c", "import time; time.sleep(60)"], tmp_path / "s.log", {}),
        Job("late", [sys.executable, "-c", "pass"], tmp_path / "l.log", {}),
    ]
    t0 = time.monotonic()
    out = run_parallel(jobs, t0 + 4.0, max_parallel=2, log=lambda _: None)
    assert time.monotonic() - t0 < 30  # SIGINT ends the sleeper at once
    assert out["quick"]["rc"] == 0 and (tmp_path / "q.log").read_text().strip() == "hi"
    assert out["slow"]["stopped"] == "deadline" and out["slow"]["rc"] != 0
    assert out["late"]["rc"] == 0  # started when "quick" ended, before the deadline


def _tokens(rate_ja: float, rate_en: float, pairs: int = 40, n: int = 50) -> Any:
    import pandas as pd

    rng = np.random.default_rng(int(rate_ja * 1000 + rate_en * 10))
    rows = []
    for p in range(pairs):
        for lang, rate in (("ja", rate_ja), ("en", rate_en)):
            acc = rng.random(n) < rate
            rows += [("draft_model", f"p{p}", lang, True, bool(a)) for a in acc]
            rows.append(("draft_model", f"p{p}", lang, False, False))  # not judged: ignored
            rows.append(("ngram", f"p{p}", lang, True, False))  # another method: ignored
    return pd.DataFrame(rows, columns=["method", "pair", "lang", "judged", "accepted"])


def test_gap_differences_resample_prompt_pairs_jointly() -> None:
    from benchmarks.control_kit.contrasts import contrasts, pair_counts

    counts = {
        "ja000": pair_counts(_tokens(0.6, 0.8)),
        "ja100": pair_counts(_tokens(0.8, 0.8)),
        "untuned": pair_counts(_tokens(0.7, 0.7)),
    }
    c = counts["ja000"]
    assert int(c["count_ja"].sum()) == 40 * 50 and int(c["count_en"].sum()) == 40 * 50
    out = contrasts(counts, [("ja000", "ja100"), ("ja000", "untuned"), ("ja000", "ja000")])
    d = out["differences"]["ja000 - ja100"]
    assert out["pairs"] == 40 and -0.25 < d["value"] < -0.15
    assert d["ci_low"] < d["decision_low"] < d["value"] < d["decision_high"] < d["ci_high"] < 0
    same = out["differences"]["ja000 - ja000"]
    assert same["value"] == same["ci_low"] == same["ci_high"] == 0.0


def test_the_gpu_driver_restores_a_committed_run_into_any_work_directory(tmp_path: Path) -> None:
    """`positive_control_gpu.sh WORK train` with FROM= a committed run (relative path)
    unpacks its training files into WORK whatever WORK is called, sets the finished run's
    records aside, and (every stage failing here: PY=false) traces nothing and exits 3."""
    work = tmp_path / "not-pc"
    env = {
        **os.environ,
        "FROM": "reports/gpu/control/run2",
        "OUT": str(tmp_path / "out"),
        "TOKENLENS_CACHE": str(tmp_path / "cache"),
        "PY": "false",
    }
    out = subprocess.run(
        ["bash", "benchmarks/positive_control_gpu.sh", str(work), "train", "60"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 3, out.stdout[-2000:] + out.stderr[-2000:]
    training = work / "training"
    assert (training / "heldout.jsonl").stat().st_size > 0
    assert not (training / "records.json").exists()
    assert "drafters" in json.loads((training / "records-restored.json").read_text())
    n = sum(1 for _ in (training / "generations.jsonl").open())
    assert n == 9216
    assert not (work / "runs").exists()
