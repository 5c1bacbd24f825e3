"""The positive control's manipulation check (benchmarks/control_kit/agreement.py, the
``check`` stage of benchmarks/positive_control.py), its held-out prompts, and logit
distillation in the fine-tune, on tiny random models on the CPU."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from benchmarks.control_kit import agreement as A
from benchmarks.control_kit import mixing
from benchmarks.control_kit import prompts as P

ROOT = Path(__file__).resolve().parent.parent


def _tiny(tmp_path: Path, seed: int, name: str) -> Path:
    """tokenlens' tiny Qwen3, 32 wide, seeded random weights, as a model directory."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from tokenlens.models.tiny import ensure_tiny

    src = ensure_tiny("tiny-qwen3", tmp_path / "cache")
    config = AutoConfig.from_pretrained(str(src))
    config.update({"hidden_size": 32, "intermediate_size": 64, "head_dim": 16})
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config)
    with torch.no_grad():  # random weights too small to rank tokens apart: widen them
        model.lm_head.weight.mul_(50.0)
    out = tmp_path / name
    model.save_pretrained(str(out))
    for f in src.iterdir():
        if f.name.startswith(("tokenizer", "chat_template", "generation_config")):
            (out / f.name).write_bytes(f.read_bytes())
    return out


def _greedy(model_dir: Path, prompt: tuple[int, ...], n: int) -> tuple[int, ...]:
    """``model_dir``'s greedy continuation, one full forward a token (no cache)."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32)
    ids = list(prompt)
    with torch.no_grad():
        for _ in range(n):
            logits = model(torch.tensor([ids])).logits[0, -1]
            ids.append(int(logits.argmax()))
    return tuple(ids[len(prompt) :])


def _prompts(k: int) -> list[tuple[int, ...]]:
    return [tuple(range(100 + 7 * i, 106 + 7 * i)) for i in range(k)]


def test_agreement_counts_top1_matches_per_example_and_language(tmp_path: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    a = _tiny(tmp_path, 1, "a")
    prompts = _prompts(4)
    own = [_greedy(a, p, 9) for p in prompts]
    examples = [
        mixing.Example("ja" if i % 2 == 0 else "en", p, o)
        for i, (p, o) in enumerate(zip(prompts, own, strict=True))
    ]
    # the last example's answer with its 3rd..5th tokens replaced: those 3 cannot match
    wrong = tuple(t if not 2 <= j < 5 else (t + 1) % 1000 + 1 for j, t in enumerate(own[3]))
    examples.append(mixing.Example("en", prompts[3], wrong))
    pairs = ["p0", "p0", "p1", "p1", "p2"]
    model = AutoModelForCausalLM.from_pretrained(str(a), dtype=torch.float32)
    c = A.measure(model, examples, pairs, seq_len=40, rows=2)
    assert c.positions.tolist() == [9] * 5
    assert c.matched[:4].tolist() == [9] * 4  # its own greedy text: every position agrees
    # position 2's and 3's and 4's tokens are wrong; 5 follows a changed prefix, may differ
    assert c.matched[4] <= 6 and c.matched[4] >= 2
    s = A.summarise(c)
    assert s["pairs"] == 3 and s["ja"]["agreement"] == 1.0 and s["ja"]["positions"] == 18
    assert s["en"]["agreement"] == pytest.approx((18 + c.matched[4]) / 27)
    assert s["gap"]["value"] == pytest.approx(1.0 - s["en"]["agreement"])
    assert s["gap"]["ci_low"] <= s["gap"]["value"] <= s["gap"]["ci_high"]


def _summary(ja: float, en: float) -> dict[str, Any]:
    return {"ja": {"agreement": ja}, "en": {"agreement": en}, "gap": {"value": ja - en}}


SHARES = {"ja000": 0.0, "ja050": 0.5, "ja100": 1.0}


def test_the_check_passes_a_planted_ordering_and_fails_without_it() -> None:
    good = {
        "untuned": _summary(0.70, 0.70),
        "ja000": _summary(0.69, 0.75),
        "ja050": _summary(0.72, 0.73),
        "ja100": _summary(0.76, 0.69),
    }
    r = A.check(good, SHARES, untuned="untuned", margin=0.02)
    assert r["passed"] is True and r["lowest"] == "ja000" and r["highest"] == "ja100"
    assert r["trained_language_minus_untuned"]["ja000"]["lang"] == "en"
    assert r["trained_language_minus_untuned"]["ja000"]["minus_untuned"] == pytest.approx(0.05)
    # the failed run of 2026-12-03, in agreement terms: fine-tuning lowered both, no order
    failed = {**good, "ja000": _summary(0.70, 0.69), "ja100": _summary(0.68, 0.69)}
    r = A.check(failed, SHARES, untuned="untuned", margin=0.02)
    assert r["passed"] is False
    assert r["conditions"] == {"ja_lowest_below_highest": False, "gap_lowest_below_untuned": False}
    # an ordering smaller than the margin is not enough
    small = {**good, "ja000": _summary(0.70, 0.71), "ja100": _summary(0.71, 0.70)}
    assert A.check(small, SHARES, untuned="untuned", margin=0.02)["passed"] is False
    # a drafter not measured: not passed
    assert (
        A.check({"ja000": good["ja000"]}, SHARES, untuned="untuned", margin=0.02)["passed"] is False
    )


def _heldout_file(
    path: Path, ja_answers: dict[int, tuple[int, ...]], en_answers: dict[int, tuple[int, ...]]
) -> None:
    prompts = _prompts(len(ja_answers))
    with path.open("w") as f:
        for i, p in enumerate(prompts):
            for lang, answers in (("ja", ja_answers), ("en", en_answers)):
                row = {
                    "id": f"h{i}-{lang}",
                    "lang": lang,
                    "pair": f"h{i}",
                    "prompt_ids": list(p),
                    "answer_ids": list(answers[i]),
                }
                f.write(json.dumps(row) + "\n")


def _run_check(work: Path, untuned: Path, *more: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "positive_control.py"),
            "check",
            "--work",
            str(work),
            "--drafter",
            str(untuned),
            "--seq-len",
            "64",
            *more,
        ],
        capture_output=True,
        text=True,
        check=False,
    )


def test_the_check_stage_records_agreement_and_stops_a_failed_manipulation(tmp_path: Path) -> None:
    """Held-out "target" text: model A's greedy answers in Japanese, model B's in English.
    A drafter that is A has the higher Japanese agreement, one that is B a Japanese deficit;
    C (the untuned one) agrees with neither. Named the right way round the check passes;
    swapped, the stage exits 3 with one line."""
    a, b, c = (_tiny(tmp_path, s, n) for s, n in ((1, "A"), (2, "B"), (3, "C")))
    prompts = _prompts(3)
    ja = {i: _greedy(a, p, 8) for i, p in enumerate(prompts)}
    en = {i: _greedy(b, p, 8) for i, p in enumerate(prompts)}
    for case, (d0, d1) in {"right": (b, a), "swapped": (a, b)}.items():
        work = tmp_path / case
        (work / "training").mkdir(parents=True)
        (work / "drafters").mkdir()
        _heldout_file(work / "training" / "heldout.jsonl", ja, en)
        for name, src in (("ja000", d0), ("ja100", d1)):
            (work / "drafters" / name).symlink_to(src)
        records = {"drafters": {"ja000": {"share": 0.0}, "ja100": {"share": 1.0}}}
        (work / "training" / "records.json").write_text(json.dumps(records))
        out = _run_check(work, c)
        rec = json.loads((work / "training" / "records.json").read_text())
        check = rec["manipulation_check"]
        d = rec["drafters"]
        if case == "right":
            assert out.returncode == 0, out.stderr[-2000:]
            assert check["passed"] is True
            assert d["ja100"]["heldout_agreement"]["ja"]["agreement"] == 1.0
            assert d["ja000"]["heldout_agreement"]["en"]["agreement"] == 1.0
            assert d["ja000"]["heldout_agreement"]["gap"]["value"] < -0.5
        else:
            assert out.returncode == 3
            last = out.stderr.strip().splitlines()[-1]
            assert last.startswith("manipulation check FAILED") and "trace nothing" in last
            assert check["passed"] is False and check["examples"] == 6
        assert "untuned_heldout_agreement" in rec


def test_a_shallow_run_s_check_also_measures_the_untrained_cut_drafter(tmp_path: Path) -> None:
    """With --drafter-layers N the check measures the untuned drafter cut to N layers
    (saved once, untrained) beside the others, records it apart from the judged ones and
    leaves the check's rule to the untuned full drafter."""
    a, b, c = (_tiny(tmp_path, s, n) for s, n in ((1, "A"), (2, "B"), (3, "C")))
    prompts = _prompts(3)
    ja = {i: _greedy(a, p, 8) for i, p in enumerate(prompts)}
    en = {i: _greedy(b, p, 8) for i, p in enumerate(prompts)}
    work = tmp_path / "w"
    (work / "training").mkdir(parents=True)
    (work / "drafters").mkdir()
    _heldout_file(work / "training" / "heldout.jsonl", ja, en)
    for name, src in (("ja000", b), ("ja100", a)):
        (work / "drafters" / name).symlink_to(src)
    records = {"drafters": {"ja000": {"share": 0.0}, "ja100": {"share": 1.0}}}
    (work / "training" / "records.json").write_text(json.dumps(records))
    out = _run_check(work, c, "--drafter-layers", "1")
    assert out.returncode == 0, out.stderr[-2000:]
    rec = json.loads((work / "training" / "records.json").read_text())
    refs = rec["reference_heldout_agreement"]
    assert set(refs) == {"untuned", "untuned_1layers"}
    assert refs["untuned"] == rec["untuned_heldout_agreement"]
    assert rec["manipulation_check"]["values"]["gap_untuned"] == refs["untuned"]["gap"]["value"]
    cut = work / "drafters-reference" / "untuned_1layers"
    assert json.loads((cut / "config.json").read_text())["num_hidden_layers"] == 1
    assert "untuned_1layers" not in rec["drafters"]


def test_heldout_prompts_share_nothing_with_training_or_evaluation() -> None:
    kept, _ = P.prepare(ROOT)
    held, report = P.prepare_heldout(ROOT, kept)
    assert report["overlapping"] == 0 and len(held) == report["built"] == 2 * len(
        P.HELDOUT_TEMPLATES
    ) * len(P.HELDOUT_TOPICS)
    assert {p["id"] for p in held}.isdisjoint({p["id"] for p in kept})
    # a training prompt that repeats a held-out text drops that pair (and those of the
    # same template, which share 12-character windows with it)
    copy = {"id": "x-ja", "lang": "ja", "pair": "x", "text": P.prompt_texts(held[0])[-1]}
    held2, report2 = P.prepare_heldout(ROOT, [*kept, copy])
    assert held[0]["pair"] not in {p["pair"] for p in held2}
    assert len(held2) == len(held) - 2 * report2["dropped_pairs"] < len(held)


def test_logit_distillation_moves_the_drafter_towards_the_teacher(tmp_path: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    from benchmarks.control_kit.finetune import TrainConfig, train

    student, teacher = _tiny(tmp_path, 4, "student"), _tiny(tmp_path, 5, "teacher")
    prompts = _prompts(6)
    examples = [mixing.Example("ja", p, _greedy(teacher, p, 10)) for p in prompts]
    packed = mixing.pack(examples, 64, pad_id=0)
    cfg = TrainConfig(
        lr=3e-2, rows_per_step=1, micro_rows=1, seq_len=64, objective="kl", warmup=0.0
    )

    def kl_to_teacher(model_dir: Path) -> float:
        s = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32)
        t = AutoModelForCausalLM.from_pretrained(str(teacher), dtype=torch.float32)
        ids = torch.tensor([list(prompts[0] + examples[0].answer_ids)])
        with torch.no_grad():
            lt, ls = t(ids).logits.log_softmax(-1), s(ids).logits.log_softmax(-1)
        return float((lt.exp() * (lt - ls)).sum(-1).mean())

    before = kl_to_teacher(student)
    rec = train(student, packed, tmp_path / "kl", cfg, teacher=teacher)
    assert rec["objective"] == "kl" and rec["teacher"] == str(teacher)
    assert all(x["loss"] >= 0 for x in rec["loss_curve"])  # a KL divergence
    assert "match_ja" in rec["loss_curve"][0] and rec["loss_curve"][0]["match_en"] is None
    assert kl_to_teacher(tmp_path / "kl") < before
    with pytest.raises(ValueError, match="teacher"):
        train(student, packed, tmp_path / "no", cfg)


def test_prompts_are_rendered_as_the_tracer_renders_them_in_the_study_s_proportion(
    tmp_path: Path,
) -> None:
    """The 2026-12-03 run trained on chat-templated answers only while 108 of the study's
    120 prompts are raw text: prompts now come in both renderings, the same one for both
    languages of a pair, and ``render`` gives the ids the tracer's engine receives."""
    from transformers import AutoTokenizer

    from tokenlens.engine.config import PromptJob
    from tokenlens.engine.worker import render_prompt
    from tokenlens.models.tiny import ensure_tiny

    study = P.read_jsonl(ROOT / "reports" / "full" / "prompts.jsonl")
    assert sum("text" in p for p in study) / len(study) == pytest.approx(P.RAW_SHARE)
    for prompts in (P.build(0), P.build_heldout()):
        by_pair: dict[str, set[bool]] = {}
        for p in prompts:
            by_pair.setdefault(p["pair"], set()).add("text" in p)
        assert all(len(v) == 1 for v in by_pair.values())
        raw = sum(v == {True} for v in by_pair.values()) / len(by_pair)
        assert abs(raw - P.RAW_SHARE) < 0.08 and raw < 1.0
    assert all("messages" in p for p in P.build(0, raw_share=0.0))
    tok = AutoTokenizer.from_pretrained(str(ensure_tiny("tiny-qwen3", tmp_path / "cache")))
    kinds = {"text" in p: p for p in P.build_heldout()}
    assert set(kinds) == {True, False}
    for p in kinds.values():
        job = PromptJob(p["id"], p.get("messages"), p.get("text"), None)
        assert P.render(tok, p) == render_prompt(tok, job, {})
    assert P.render(tok, kinds[True])[0] != P.render(tok, kinds[False])[0]  # no template


def test_a_shallow_drafter_keeps_its_first_layers_and_loads_as_saved(tmp_path: Path) -> None:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from benchmarks.control_kit.finetune import TrainConfig, train

    student, teacher = _tiny(tmp_path, 4, "student"), _tiny(tmp_path, 5, "teacher")
    full = AutoModelForCausalLM.from_pretrained(str(student), dtype=torch.float32)
    depth = full.config.num_hidden_layers
    assert depth >= 2, "the tiny model must have layers to drop"
    prompts = _prompts(4)
    examples = [mixing.Example("en", p, _greedy(teacher, p, 8)) for p in prompts]
    packed = mixing.pack(examples, 64, pad_id=0)
    cfg = TrainConfig(lr=1e-2, rows_per_step=1, micro_rows=1, seq_len=64, warmup=0.0, layers=1)
    rec = train(student, packed, tmp_path / "shallow", cfg, teacher=teacher)
    assert rec["config"]["layers"] == 1
    config = AutoConfig.from_pretrained(str(tmp_path / "shallow"))
    assert config.num_hidden_layers == 1
    if getattr(config, "layer_types", None) is not None:
        assert len(config.layer_types) == 1
    saved = AutoModelForCausalLM.from_pretrained(str(tmp_path / "shallow"), dtype=torch.float32)
    assert len(saved.model.layers) == 1
    assert sum(p.numel() for p in saved.parameters()) < sum(p.numel() for p in full.parameters())
    # before training: the kept layer is the original's first one, the embeddings and the
    # output matrix are the original's, nothing re-initialised
    from benchmarks.control_kit.finetune import shallow

    cut = AutoModelForCausalLM.from_pretrained(str(student), dtype=torch.float32)
    shallow(cut, 1)
    for a, b in (
        (cut.model.layers[0].mlp.up_proj.weight, full.model.layers[0].mlp.up_proj.weight),
        (cut.model.embed_tokens.weight, full.model.embed_tokens.weight),
        (cut.lm_head.weight, full.lm_head.weight),
    ):
        assert torch.equal(a, b)
    with pytest.raises(ValueError, match="--drafter-layers"):
        train(student, packed, tmp_path / "bad", TrainConfig(layers=depth + 1, objective="ce"))
