"""Simulated studies written as real run directories, for end-to-end tests of analyze.

Each run of a :class:`~tokenlens.testing.simulate.Study` becomes what ``tokenlens
trace`` writes (through :class:`tokenlens.rundir.RunWriter`): ``manifest.json``,
``requests.parquet`` with the output tokens and the target's top-5 logprobs (the
simulated top-1 probability first), ``events.parquet`` in the contract's format and
``metrics.json`` with the counters vLLM would report for these events. The analysis
then reads, joins and classifies it like any captured run.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from tokenlens import __version__
from tokenlens.arrays import I64
from tokenlens.capture.events import EVENTS_SCHEMA
from tokenlens.engine.results import SpecCounters
from tokenlens.rundir import EVENTS, REQUESTS_SCHEMA, RunWriter, now_iso
from tokenlens.signature import make_signature
from tokenlens.testing.simulate import SimRun, Study
from tokenlens.testing.text import TOKENIZER
from tokenlens.text import Vocabulary

_ALT_SHARES = np.array([0.5, 0.2, 0.1, 0.05])
_VOCAB = 151_643  # ordinary Qwen2.5 ids (specials above)


def write_study(study: Study, root: Path) -> list[Path]:
    """One run directory per run under ``root`` (named by the run labels)."""
    alternatives = _alternatives(study)
    return [write_run(study, run, root / run.spec.label, alternatives) for run in study.runs]


def _alternatives(study: Study) -> I64:
    """Four runner-up token ids per output position, none equal to the target's token."""
    rng = np.random.default_rng([study.seed, 7])
    alt = rng.integers(0, _VOCAB, size=(*study.tokens.shape, len(_ALT_SHARES)))
    clash = alt == study.tokens[:, :, None]
    alt[clash] = (alt[clash] + 1) % _VOCAB
    return alt


def write_run(study: Study, run: SimRun, path: Path, alternatives: I64) -> Path:
    """Write ``run`` of ``study`` as a complete run directory at ``path``."""
    from tokenlens.text import load_tokenizer

    vocab = load_tokenizer(TOKENIZER)
    spec = run.spec
    signature = make_signature(
        {
            "tokenlens": __version__,
            "vllm": "simulated",
            "model": "simulated",
            "draft": "simulated",
            "method": spec.method,
            "k": spec.k,
            "tokenizer": TOKENIZER,
            "sampling": "greedy",
            "corpus": f"testbed:{study.scenario.name}",
            "seed": study.seed,
        }
    )
    manifest = {
        "signature": signature,
        "tokenlens_version": __version__,
        "vllm_version": "simulated",
        "model": "simulated",
        "tokenizer": TOKENIZER,
        "speculative": {
            "method": spec.method,
            "model": "simulated",
            "num_speculative_tokens": spec.k,
        },
        "sampling": {"temperature": 0.0, "seed": study.seed},
        "created_at": now_iso(),
        "argv": ["tokenlens.testing", study.scenario.name, spec.label],
    }
    writer = RunWriter(path, manifest, overwrite=True)
    writer.write_requests(_requests(study, alternatives, vocab))
    pq.write_table(_events(study, run, alternatives), writer.path / EVENTS)
    writer.write_metrics(SpecCounters.from_json(run.counters()))
    writer.complete()
    return writer.path


def _requests(study: Study, alternatives: I64, vocab: Vocabulary) -> pa.Table:
    rows: dict[str, list[object]] = {name: [] for name in REQUESTS_SCHEMA.names}
    for i, rid in enumerate(study.prompt_ids):
        n = int(study.length[i])
        ids = study.tokens[i, :n]
        q = study.q[i, :n]
        alt_p = np.minimum((1.0 - q)[:, None] * _ALT_SHARES[None, :], 0.999 * q[:, None])
        rows["request_id"].append(rid)
        rows["prompt_id"].append(rid)
        rows["lang"].append(str(study.langs[i]))
        rows["pair"].append(study.pairs[i])
        rows["output_text"].append(b"".join(vocab.pieces(ids)).decode("utf-8", "replace"))
        rows["output_token_ids"].append(ids.tolist())
        rows["finish_reason"].append("length" if n == study.scenario.max_tokens else "stop")
        rows["prompt_token_count"].append(0)
        rows["vllm_request_id"].append(None)
        rows["first_token_latency"].append(None)
        rows["token_logprob"].append(np.log(q).tolist())
        rows["token_rank"].append([1] * n)
        rows["top_ids"].append(np.concatenate([ids[:, None], alternatives[i, :n]], axis=1).tolist())
        rows["top_logprobs"].append(np.log(np.concatenate([q[:, None], alt_p], axis=1)).tolist())
    return pa.table(rows, schema=REQUESTS_SCHEMA)


def _events(study: Study, run: SimRun, alternatives: I64) -> pa.Table:
    """events.parquet: drafts (accepted = the target's token; a rejected one = a runner-up
    or a random id), the token that came out at judged rows, and its output index."""
    ev = run.events
    rng = np.random.default_rng([study.seed, 11, len(ev)])
    safe = np.where(ev.index >= 0, ev.index, 0)
    target = study.tokens[ev.request, safe]
    runner_up = alternatives[ev.request, safe, 0]
    near = rng.random(len(ev)) < 0.5
    wrong = np.where(near & (ev.index >= 0), runner_up, rng.integers(0, _VOCAB, len(ev)))
    wrong = np.where(wrong == target, (wrong + 1) % _VOCAB, wrong)
    draft = np.where(ev.accepted, target, wrong)
    rid = np.asarray(study.prompt_ids, dtype=object)[ev.request]
    return pa.table(
        {
            "request_id": pa.array(rid, pa.string()),
            "step": pa.array(ev.step, pa.int64()),
            "position": pa.array(ev.position, pa.int64()),
            "draft_token_id": pa.array(draft, pa.int64()),
            "accepted": pa.array(ev.accepted, pa.bool_()),
            "emitted_token_id": pa.array(target, pa.int64(), mask=~ev.judged),
            "output_index": pa.array(ev.output_index, pa.int64(), mask=ev.output_index < 0),
        },
        schema=EVENTS_SCHEMA,
    )
