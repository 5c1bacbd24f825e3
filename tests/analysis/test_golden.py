"""Golden traces: two hand-written requests whose every rate is computed by hand below.

Japanese request (k = 3), output 私は|昨日|、|東|京|の (mixed, kanji, punct, kanji,
kanji, hiragana):
  step 0: accept 私は, accept 昨日, reject (target emits 、)   -> 2 accepted, 3 judged
  step 1: reject (target emits 東), 2 positions not judged      -> 0 accepted, 1 judged
  step 2: accept 京, reject (target emits の), 1 not judged     -> 1 accepted, 2 judged
English request, output The| quick| brown| fox| jumps (all latin):
  step 0: accept The, quick, brown; bonus " fox"               -> 3 accepted, 3 judged
  step 1: reject (target emits " jumps"), 2 not judged          -> 0 accepted, 1 judged
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tokenlens.analysis import AnalyzeConfig, run_analyze
from tokenlens.capture.events import EVENTS_SCHEMA
from tokenlens.engine.results import SpecCounters
from tokenlens.rundir import EVENTS, REQUESTS_SCHEMA, RunWriter

JA_IDS = [128976, 105188, 5373, 102356, 46553, 15767]
EN_IDS = [785, 3974, 13876, 38835, 34208]
Golden = tuple[dict[str, Any], pa.Table]
WRONG = 999  # a draft the target rejected

# (request, step, position, draft, accepted, emitted, output_index)
EVENTS_ROWS = [
    ("ja-1", 0, 0, 128976, True, 128976, 0),
    ("ja-1", 0, 1, 105188, True, 105188, 1),
    ("ja-1", 0, 2, WRONG, False, 5373, 2),
    ("ja-1", 1, 0, 1000, False, 102356, 3),
    ("ja-1", 1, 1, 1001, False, None, None),
    ("ja-1", 1, 2, 1002, False, None, None),
    ("ja-1", 2, 0, 46553, True, 46553, 4),
    ("ja-1", 2, 1, 1003, False, 15767, 5),
    ("ja-1", 2, 2, -1, False, None, None),
    ("en-1", 0, 0, 785, True, 785, 0),
    ("en-1", 0, 1, 3974, True, 3974, 1),
    ("en-1", 0, 2, 13876, True, 13876, 2),
    ("en-1", 1, 0, 1004, False, 34208, 4),
    ("en-1", 1, 1, 1005, False, None, None),
    ("en-1", 1, 2, 1006, False, None, None),
]
# Target top-k for the Japanese output token 、 (index 2): 、 0.6, the rejected draft 0.3.
P_TOP, P_DRAFT = 0.6, 0.3


def _write(path: Path) -> Path:
    manifest = {
        "signature": "tokenlens:test|method:draft_model|k:3|seed:0",
        "tokenlens_version": "test",
        "vllm_version": "test",
        "model": "test",
        "tokenizer": "qwen2.5",
        "speculative": {"method": "draft_model", "model": "d", "num_speculative_tokens": 3},
        "sampling": {},
        "created_at": "2026-01-01T00:00:00+00:00",
        "argv": [],
    }
    writer = RunWriter(path, manifest)
    n_ja = len(JA_IDS)
    ja_top_ids = [[t] for t in JA_IDS]
    ja_top_lps = [[0.0] for _ in JA_IDS]
    ja_top_ids[2] = [5373, WRONG]
    ja_top_lps[2] = [math.log(P_TOP), math.log(P_DRAFT)]
    requests = {
        "request_id": ["ja-1", "en-1"],
        "prompt_id": ["ja-1", "en-1"],
        "lang": ["ja", "en"],
        "pair": ["p1", "p1"],
        "output_text": ["私は昨日、東京の", "The quick brown fox jumps"],
        "output_token_ids": [JA_IDS, EN_IDS],
        "finish_reason": ["length", "length"],
        "prompt_token_count": [0, 0],
        "vllm_request_id": [None, None],
        "first_token_latency": [None, None],
        "token_logprob": [[lp[0] for lp in ja_top_lps], None],
        "token_rank": [[1] * n_ja, None],
        "top_ids": [ja_top_ids, None],
        "top_logprobs": [ja_top_lps, None],
    }
    writer.write_requests(pa.table(requests, schema=REQUESTS_SCHEMA))
    cols = list(zip(*EVENTS_ROWS, strict=True))
    events = pa.table(dict(zip(EVENTS_SCHEMA.names, cols, strict=True)), schema=EVENTS_SCHEMA)
    pq.write_table(events, path / EVENTS)
    writer.write_metrics(SpecCounters(5, 15, 6, (3, 2, 1)))
    writer.complete()
    return path


@pytest.fixture(scope="module")
def golden(tmp_path_factory: pytest.TempPathFactory) -> Golden:
    root = tmp_path_factory.mktemp("golden")
    result = run_analyze(
        AnalyzeConfig(runs=(_write(root / "run"),), out=root / "out", n_boot=50, min_count=1)
    )
    summary = json.loads(result.summary_path.read_text(encoding="utf-8"))
    return summary, pq.read_table(result.tokens_path)


def test_acceptance_uses_all_rows(golden: Golden) -> None:
    acc = golden[0]["acceptance"]
    assert acc["ja"]["rate"] == pytest.approx(3 / 9)  # 3 accepted of 9 draft tokens
    assert acc["ja"]["n"] == 9
    assert acc["en"]["rate"] == pytest.approx(3 / 6)
    assert acc["en"]["n"] == 6
    assert acc["ja"]["ci_low"] is None  # one request per language: no interval
    judged = golden[0]["acceptance_judged"]
    assert judged["ja"]["rate"] == pytest.approx(3 / 6)  # 6 judged positions
    assert judged["en"]["rate"] == pytest.approx(3 / 4)


def test_classes_count_judged_positions_only(golden: Golden) -> None:
    ja = golden[0]["by_script"]["ja"]
    assert ja["mixed"]["rate"] == 1.0 and ja["mixed"]["n"] == 1  # 私は accepted
    assert ja["kanji"]["rate"] == pytest.approx(2 / 3) and ja["kanji"]["n"] == 3  # 昨日 京 / 東
    assert ja["punct"]["rate"] == 0.0 and ja["punct"]["n"] == 1  # 、 came out as the correction
    assert ja["hiragana"]["rate"] == 0.0 and ja["hiragana"]["n"] == 1
    en = golden[0]["by_script"]["en"]
    assert en["latin"]["rate"] == pytest.approx(3 / 4) and en["latin"]["n"] == 4
    assert sum(g["n"] for g in ja.values()) == 6


def test_positions_unconditional_and_conditional(golden: Golden) -> None:
    s = golden[0]
    unc = s["by_position"]["ja"]
    assert [unc[p]["rate"] for p in "012"] == pytest.approx([2 / 3, 1 / 3, 0.0])
    cond = s["by_position_conditional"]["ja"]
    assert [cond[p]["rate"] for p in "012"] == pytest.approx([2 / 3, 1 / 2, 0.0])
    assert [cond[p]["n"] for p in "012"] == [3, 2, 1]
    assert [s["by_position"]["en"][p]["rate"] for p in "012"] == pytest.approx([0.5, 0.5, 0.5])


def test_text_per_step_and_gap(golden: Golden) -> None:
    s = golden[0]
    # Accepted 私は(2 chars) 昨日(2) 京(1) over 3 steps; "The"(3) " quick"(6) " brown"(6) over 2.
    assert s["text_per_step"]["ja"]["accepted_chars"]["value"] == pytest.approx(5 / 3)
    assert s["text_per_step"]["en"]["accepted_chars"]["value"] == pytest.approx(15 / 2)
    # UTF-8: 私は 6 bytes, 昨日 6, 京 3.
    assert s["text_per_step"]["ja"]["accepted_bytes"]["value"] == pytest.approx(15 / 3)
    assert s["gap"]["overall"]["value"] == pytest.approx(3 / 9 - 3 / 6)
    assert s["gap"]["judged"]["value"] == pytest.approx(3 / 6 - 3 / 4)


def test_reconciliation_and_verdicts_on_one_request(golden: Golden) -> None:
    s = golden[0]
    assert s["runs"][0]["reconciliation"]["matches"] is True
    for h in s["hypotheses"].values():  # one prompt per language: cannot decide
        assert h["verdict"] == "insufficient_data"
        assert "1 Japanese and 1 English prompts" in h["evidence"]
        assert "at least 30 per language" in h["evidence"]
    assert s["prompts"] == {"ja": 1, "en": 1}
    assert "bootstrap:50,seed0" in s["signature"] and "dict:unidic" in s["signature"]


def test_speed_model_reads_the_judged_rate_and_vllm_positions(golden: Golden) -> None:
    speed = golden[0]["runs"][0]["speed"]
    ja = speed["by_lang"]["ja"]
    # i.i.d. MLE = judged rate 3/6; tokens/step at k=3 = (1 - a^4) / (1 - a) = 1.875.
    assert ja["iid_rate"] == pytest.approx(0.5)
    assert ja["iid_tokens_per_step"] == pytest.approx(1.875)
    # Measured: 1 + accepted / drafts = 1 + 3/3; per-position curve 2/3, 1/3, 0 -> 2.0.
    assert ja["measured_tokens_per_step"] == pytest.approx(2.0)
    assert ja["predicted_tokens_per_step"] == pytest.approx(2.0)
    # No bench and no --draft-cost: the cost is assumed, so no k is recommended.
    assert speed["draft_cost_measured"] is False
    assert ja["recommended_k"] is None and "assumed" in ja["no_recommendation"]


def test_tokens_table_rows(golden: Golden) -> None:
    t = golden[1].to_pylist()
    assert len(t) == len(EVENTS_ROWS)
    first_reject = t[2]  # the Japanese 、 slot
    assert first_reject["judged"] and not first_reject["accepted"]
    assert first_reject["token_text"] == "、" and first_reject["script"] == "punct"
    assert first_reject["top1_prob"] == pytest.approx(P_TOP)
    assert first_reject["draft_target_rank"] == 2
    assert first_reject["draft_target_logprob"] == pytest.approx(math.log(P_DRAFT))
    tail = 1 - P_TOP - P_DRAFT  # one piece: tail 0.1 <= smallest listed 0.3
    entropy = -(P_TOP * math.log(P_TOP) + P_DRAFT * math.log(P_DRAFT) + tail * math.log(tail))
    assert first_reject["entropy"] == pytest.approx(entropy)
    not_judged = t[4]
    assert not not_judged["judged"] and not_judged["script"] is None
    assert not_judged["emitted_token_id"] is None and not_judged["output_index"] is None
    assert t[8]["draft_token_id"] == -1 and t[8]["draft_text"] is None
    assert t[0]["draft_text"] == "私は" and t[0]["method"] == "draft_model" and t[0]["k"] == 3
    assert t[9]["top1_prob"] is None  # the English request has no logprobs
