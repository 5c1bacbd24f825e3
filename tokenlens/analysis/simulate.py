"""Simulated traces with planted effects: the ground truth the analysis is tested against.

A simulated run looks exactly like a captured one (manifest, requests with top-k
logprobs, events, vLLM counters) and uses real Qwen2.5 token ids, so the text layer
classifies it for real. What is planted:

- each language's output is a sequence of token *units* drawn i.i.d. from a class
  mix (hiragana, kanji, byte_fragment pairs, latin, ...); a unit is one real token of
  that script, or for ``byte_fragment`` the two fragment tokens of one character;
- the target's top-1 probability q at each output position is drawn from a Beta
  distribution per (language, class): H1 lowers it for Japanese's hard classes;
- at a judged position the draft is accepted with probability
  min(1, m_r * d(method, lang) * q): d is the drafter's agreement with the target
  (H2 lowers it for Japanese, for trained drafters only) and m_r ~ U(1-s, 1+s) is a
  request effect that makes tokens of one request correlated;
- each step drafts k tokens; the first rejection ends the step (the target's token
  comes out there), k acceptances add a bonus token; every request runs ``steps``
  verification steps.

Used by the tests (coverage, verdicts, end to end) and by benchmarks/bench_analyze.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from tokenlens import __version__
from tokenlens.analysis.join import CONF_EDGES, CONF_LABELS, bucket
from tokenlens.engine.results import SpecCounters
from tokenlens.rundir import EVENTS, EVENTS_SCHEMA, REQUESTS_SCHEMA, RunWriter, now_iso
from tokenlens.signature import make_signature

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]

FRAGMENT = "byte_fragment"
TOKENIZER = "qwen2.5"

_JA_TEXT = (
    "私は昨日、東京駅の近くでラーメンを三杯食べました。このコンピューターのメモリを"
    "増やしたところ、処理速度が約1.5倍になった。吾輩は猫である。名前はまだ無い。"
    "彼女は静かに窓を開け、遠くの山々を眺めながら深いため息をついた。𠮷野家の牛丼は"
    "安くて美味しいと評判だ。投機的デコーディングでは、小さなモデルが候補トークンを"
    "提案し、大きなモデルが検証する。鬱蒼とした森の奥に、古い祠が佇んでいる。"
    "個人情報の保護を導入が必要です。価格は1200円で、送料は無料となっております。"
)
_EN_TEXT = (
    "The quick brown fox jumps over the lazy dog while the cat sleeps on the mat. "
    "Speculative decoding lets a small draft model propose tokens that the target "
    "verifies. In March 2024, the team released version 3.5 with a new tokenizer and "
    "better throughput. Please explain the code below and suggest how to make it faster."
)


@dataclass(frozen=True)
class Pools:
    """Real Qwen2.5 token ids by script: single tokens, and fragment pairs (one char)."""

    single: Mapping[str, I64]
    pairs: I64  # shape (n, 2)


@lru_cache(maxsize=1)
def pools() -> Pools:
    """Classify the built-in sentences once and group their tokens by script."""
    from tokenlens.text import classify_requests, load_tokenizer

    vocab = load_tokenizer(TOKENIZER)
    table = classify_requests(
        [(vocab.encode(_JA_TEXT), "ja"), (vocab.encode(_EN_TEXT), "en")], vocab
    ).to_pandas()
    single: dict[str, I64] = {}
    for script, ids in table[table["script"] != FRAGMENT].groupby("script")["token_id"]:
        single[str(script)] = np.unique(ids.to_numpy(dtype=np.int64))
    frag = table[table["script"] == FRAGMENT]
    pairs = [
        group["token_id"].to_numpy(dtype=np.int64)
        for _, group in frag.groupby(["request_index", "char_start"])
        if len(group) == 2
    ]
    return Pools(single=single, pairs=np.unique(np.stack(pairs), axis=0))


@dataclass(frozen=True)
class LangModel:
    """One language's output: unit mix by class, and Beta(a, b) of q per class."""

    lang: str
    mix: Mapping[str, float]
    confidence: Mapping[str, tuple[float, float]]


@dataclass(frozen=True)
class Scenario:
    """Everything planted in a simulated study."""

    langs: tuple[LangModel, ...]
    agreement: Mapping[tuple[str, str], float]
    k: int = 3
    requests: int = 40
    steps: int = 30
    spread: float = 0.3
    classes: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        names: list[str] = []
        for lm in self.langs:
            names += [c for c in lm.mix if c not in names]
        object.__setattr__(self, "classes", tuple(names))


NEUTRAL = (6.0, 2.0)
HARD = {"kanji": (3.0, 3.0), "mixed": (3.0, 3.0), FRAGMENT: (2.0, 4.0), "katakana": (4.0, 3.0)}
JA_MIX = {
    "hiragana": 0.35,
    "kanji": 0.25,
    "katakana": 0.10,
    "punct": 0.10,
    "mixed": 0.10,
    FRAGMENT: 0.05,
    "digit": 0.05,
}
EN_MIX = {"latin": 0.80, "punct": 0.15, "digit": 0.05}


def scenario(
    h1: bool, h2: bool, *, requests: int = 40, steps: int = 30, k: int = 3, spread: float = 0.3
) -> Scenario:
    """The standard study: Japanese vs English, an n-gram and a trained drafter.

    ``h1``: Japanese's hard classes (kanji, mixed, fragments, katakana) get lower target
    confidence. ``h2``: the trained drafter (``draft_model``) agrees less with the
    target on Japanese (0.75 instead of 0.9); n-gram agreement is 0.6 for both.
    """
    ja_conf = {c: (HARD.get(c, NEUTRAL) if h1 else NEUTRAL) for c in JA_MIX}
    en_conf = dict.fromkeys(EN_MIX, NEUTRAL)
    agreement = {
        ("ngram", "ja"): 0.6,
        ("ngram", "en"): 0.6,
        ("draft_model", "ja"): 0.75 if h2 else 0.9,
        ("draft_model", "en"): 0.9,
    }
    return Scenario(
        langs=(LangModel("ja", JA_MIX, ja_conf), LangModel("en", EN_MIX, en_conf)),
        agreement=agreement,
        k=k,
        requests=requests,
        steps=steps,
        spread=spread,
    )


@dataclass(frozen=True)
class Simulated:
    """One simulated run: per-request outputs and one row per event."""

    method: str
    k: int
    request_ids: list[str]
    langs: list[str]
    outputs: list[I64]
    classes: list[I64]
    confidence: list[F64]
    alternatives: list[I64]
    class_names: tuple[str, ...]
    events: pd.DataFrame

    def frame(self, run: str) -> pd.DataFrame:
        """The analysis frame :func:`~tokenlens.analysis.analyze.summarize` takes.

        The same columns join_run produces for the statistics (script from the planted
        class, top1_prob from the planted q), without tokenizer or MeCab: fast enough
        for hundreds of simulated studies.
        """
        ev = self.events
        req = ev["req"].to_numpy()
        judged = ev["judged"].to_numpy()
        starts = np.concatenate(([0], np.cumsum([len(c) for c in self.classes])))
        flat = starts[req] + np.where(judged, ev["output_index"].to_numpy(), 0)
        cls = np.concatenate(self.classes)[flat]
        q = np.concatenate(self.confidence)[flat]
        script = pd.Categorical.from_codes(np.where(judged, cls, -1), categories=self.class_names)
        q = np.where(judged, q, np.nan)
        return pd.DataFrame(
            {
                "run": run,
                "method": self.method,
                "k": self.k,
                "request_id": pd.Categorical.from_codes(req, categories=self.request_ids),
                "lang": pd.Categorical(np.asarray(self.langs, dtype=object)[req]),
                "step": ev["step"].to_numpy(),
                "position": ev["position"].to_numpy(),
                "accepted": ev["accepted"].to_numpy(),
                "judged": judged,
                "script": script,
                "top1_prob": q,
                "conf_bucket": bucket(q, CONF_EDGES, CONF_LABELS),
            }
        )

    def write(self, path: Path, seed: int = 0) -> Path:
        """Write a run directory (manifest, requests, events, metrics) at ``path``."""
        from tokenlens.text import load_tokenizer

        vocab = load_tokenizer(TOKENIZER)
        signature = make_signature(
            {
                "tokenlens": __version__,
                "vllm": "simulated",
                "model": "simulated",
                "draft": "simulated",
                "method": self.method,
                "k": self.k,
                "tokenizer": TOKENIZER,
                "sampling": "greedy",
                "corpus": "simulated",
                "seed": seed,
            }
        )
        manifest = {
            "signature": signature,
            "tokenlens_version": __version__,
            "vllm_version": "simulated",
            "model": "simulated",
            "tokenizer": TOKENIZER,
            "speculative": {
                "method": self.method,
                "model": "simulated",
                "num_speculative_tokens": self.k,
            },
            "sampling": {"temperature": 0.0, "seed": seed},
            "created_at": now_iso(),
            "argv": ["simulate"],
        }
        writer = RunWriter(path, manifest, overwrite=True)
        writer.write_requests(self._requests(vocab.pieces))
        ev = self.events
        table = pa.table(
            {
                "request_id": pa.array(np.asarray(self.request_ids, dtype=object)[ev["req"]]),
                "step": pa.array(ev["step"].to_numpy()),
                "position": pa.array(ev["position"].to_numpy()),
                "draft_token_id": pa.array(ev["draft"].to_numpy()),
                "accepted": pa.array(ev["accepted"].to_numpy()),
                "emitted_token_id": pa.array(
                    ev["emitted"].to_numpy(), mask=~ev["judged"].to_numpy()
                ),
                "output_index": pa.array(
                    ev["output_index"].to_numpy(), mask=~ev["judged"].to_numpy()
                ),
            },
            schema=EVENTS_SCHEMA,
        )
        pq.write_table(table, writer.path / EVENTS)
        writer.write_metrics(self.counters())
        writer.complete()
        return writer.path

    def counters(self) -> SpecCounters:
        """vLLM's counters for these events (what a real run's metrics.json holds)."""
        ev = self.events
        acc = ev["accepted"].to_numpy()
        return SpecCounters(
            num_drafts=int((ev["position"] == 0).sum()),
            num_draft_tokens=len(ev),
            num_accepted_tokens=int(acc.sum()),
            accepted_per_position=tuple(
                int(x) for x in np.bincount(ev["position"].to_numpy()[acc], minlength=self.k)
            ),
        )

    def _requests(self, pieces: object) -> pa.Table:
        from tokenlens.text import load_tokenizer

        vocab = load_tokenizer(TOKENIZER)
        rows: dict[str, list[object]] = {name: [] for name in REQUESTS_SCHEMA.names}
        for i, rid in enumerate(self.request_ids):
            ids = self.outputs[i]
            q = self.confidence[i]
            alt = self.alternatives[i]
            top = np.minimum((1.0 - q)[:, None] * np.array([0.4, 0.2, 0.1, 0.05]), q[:, None])
            probs = np.concatenate([q[:, None], top], axis=1)
            rows["request_id"].append(rid)
            rows["prompt_id"].append(rid)
            rows["lang"].append(self.langs[i])
            rows["pair"].append(rid.split("-", 1)[1])
            rows["output_text"].append(b"".join(vocab.pieces(ids)).decode("utf-8", "replace"))
            rows["output_token_ids"].append(ids.tolist())
            rows["finish_reason"].append("length")
            rows["prompt_token_count"].append(0)
            rows["vllm_request_id"].append(None)
            rows["first_token_latency"].append(None)
            rows["token_logprob"].append(np.log(q).tolist())
            rows["token_rank"].append([1] * len(ids))
            rows["top_ids"].append(np.concatenate([ids[:, None], alt], axis=1).tolist())
            rows["top_logprobs"].append(np.log(probs).tolist())
        return pa.table(rows, schema=REQUESTS_SCHEMA)


def simulate(sc: Scenario, method: str, seed: int) -> Simulated:
    """One run of ``method`` under scenario ``sc``: ``sc.requests`` per language."""
    rng = np.random.default_rng(seed)
    pool = pools()
    n_cls = len(sc.classes)
    frag = sc.classes.index(FRAGMENT) if FRAGMENT in sc.classes else -1
    k, steps = sc.k, sc.steps
    length = steps * (k + 1) + 2
    lang_of = np.repeat(np.arange(len(sc.langs)), sc.requests)
    n_req = len(lang_of)
    mix = np.array([[lm.mix.get(c, 0.0) for c in sc.classes] for lm in sc.langs])
    mix = mix / mix.sum(axis=1, keepdims=True)

    # Units -> tokens (a fragment unit is two tokens), cut to `length` per request.
    units = np.stack([rng.choice(n_cls, size=length, p=mix[lang]) for lang in lang_of])
    reps = np.where(units == frag, 2, 1).ravel()
    cls_t = np.repeat(units.ravel(), reps)
    row_t = np.repeat(np.repeat(np.arange(n_req), length), reps)
    half = np.arange(len(cls_t)) - np.repeat(np.cumsum(reps) - reps, reps)
    pair_pick = np.repeat(rng.integers(0, len(pool.pairs), size=len(reps)), reps)
    start = np.searchsorted(row_t, np.arange(n_req))
    pos_t = np.arange(len(row_t)) - start[row_t]
    keep = pos_t < length
    cls = cls_t[keep].reshape(n_req, length)
    ids = np.zeros(cls.shape, dtype=np.int64)
    for c, name in enumerate(sc.classes):
        where = cls == c
        if c == frag:
            ids[where] = pool.pairs[pair_pick[keep], half[keep]].reshape(n_req, length)[where]
        else:
            choices = pool.single[name]
            ids[where] = choices[rng.integers(0, len(choices), size=int(where.sum()))]
    conf = np.zeros(cls.shape)
    for li, lm in enumerate(sc.langs):
        for c, name in enumerate(sc.classes):
            where = (cls == c) & (lang_of[:, None] == li)
            a, b = lm.confidence.get(name, NEUTRAL)
            conf[where] = rng.beta(a, b, size=int(where.sum()))
    conf = np.clip(conf, 0.02, 0.999)
    alternatives = rng.integers(1000, 150_000, size=(n_req, length, 4))

    m = rng.uniform(1.0 - sc.spread, 1.0 + sc.spread, size=n_req)
    d = np.array([sc.agreement[(method, lm.lang)] for lm in sc.langs])[lang_of]
    ptr = np.zeros(n_req, dtype=np.int64)
    rows_r = np.arange(n_req)[:, None]
    pos = np.arange(k)[None, :]
    parts: dict[str, list[npt.NDArray[np.generic]]] = {
        n: []
        for n in (
            "req",
            "step",
            "position",
            "draft",
            "accepted",
            "emitted",
            "output_index",
            "judged",
        )
    }
    for s in range(steps):
        idx = ptr[:, None] + pos
        p = np.minimum(1.0, m[:, None] * d[:, None] * conf[rows_r, idx])
        acc = np.cumprod(rng.random((n_req, k)) < p, axis=1).astype(bool)
        n_acc = acc.sum(axis=1)
        judged = pos <= n_acc[:, None]
        tok = ids[rows_r, idx]
        near_miss = rng.random((n_req, k)) < 0.5
        wrong = np.where(
            near_miss, alternatives[rows_r, idx, 0], rng.integers(1000, 150_000, (n_req, k))
        )
        draft = np.where(acc, tok, wrong)
        parts["req"].append(np.repeat(np.arange(n_req), k))
        parts["step"].append(np.full(n_req * k, s))
        parts["position"].append(np.tile(np.arange(k), n_req))
        parts["draft"].append(draft.ravel())
        parts["accepted"].append(acc.ravel())
        parts["emitted"].append(np.where(judged, tok, -1).ravel())
        parts["output_index"].append(np.where(judged, idx, -1).ravel())
        parts["judged"].append(judged.ravel())
        ptr = ptr + n_acc + 1
    events = pd.DataFrame({n: np.concatenate(v) for n, v in parts.items()})
    events = events.sort_values(["req", "step", "position"], kind="stable", ignore_index=True)
    langs = [sc.langs[i].lang for i in lang_of]
    request_ids = [
        f"{lang}-{i:05d}" for i, lang in zip(np.arange(n_req) % sc.requests, langs, strict=True)
    ]
    return Simulated(
        method=method,
        k=k,
        request_ids=request_ids,
        langs=langs,
        outputs=[ids[r, : ptr[r]] for r in range(n_req)],
        classes=[cls[r, : ptr[r]] for r in range(n_req)],
        confidence=[conf[r, : ptr[r]] for r in range(n_req)],
        alternatives=[alternatives[r, : ptr[r]] for r in range(n_req)],
        class_names=sc.classes,
        events=events,
    )
