"""Simulated JA/EN studies: prompts, the target's output and confidence, drafter runs.

A study has ``n`` prompt pairs (one Japanese and one English prompt each). Per
prompt the target's greedy output is a window of real text
(:mod:`tokenlens.testing.text`), the same in every run, with the target's top-1
probability at each position from the scenario's confidence process. Each run (a
drafter at some ``k``) gets its agreement sequence from the drafter's curve and
effects, and :func:`~tokenlens.testing.step_process.speculate` turns it into vLLM's events.
Runs of one study share the prompts, the outputs and the prompt effects, exactly as
real runs of one corpus do; only the per-request effects are drawn per run.

Every random draw comes from a stream keyed by its role (text, confidence, drafter
``j``, run ``r``) and is made before any parameter is applied, so the same seed
under a changed scenario is a counterfactual with common random numbers: the
difference isolates the changed mechanism (see :mod:`tokenlens.testing.truth`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
import numpy.typing as npt
import pandas as pd
from scipy.special import expit, ndtr, ndtri

from tokenlens.arrays import F64, I64
from tokenlens.arrays import Mask as B
from tokenlens.engine.results import SpecCounters
from tokenlens.testing.scenarios import Confidence, Drafter, Scenario
from tokenlens.testing.step_process import StepEvents, speculate
from tokenlens.testing.text import LANGS, Stream, rank_matched, streams
from tokenlens.text import SCRIPTS

SCRIPT_NAMES = SCRIPTS  # the text layer's script classes, in its order
MIN_CONFIDENCE = 0.05  # a top-1 probability below this is not seen in real traces
_TEXT, _CONF, _COMMON = 0, 1, 2
_DRAFTER0 = 10
_RUN0 = 100


@dataclass(frozen=True)
class RunSpec:
    """One run of a study: a label (the run directory's name), a drafter, and k."""

    label: str
    method: str
    k: int


@dataclass(frozen=True)
class SimRun:
    """One simulated run: its agreement process and vLLM's events."""

    spec: RunSpec
    agree_prob: F64  # (requests, width): probability the drafter agrees at t
    agree: B  # (requests, width)
    offer: B  # (requests, width)
    events: StepEvents

    def counters(self) -> dict[str, object]:
        """vLLM's counters of this run (metrics.json), from its events."""
        ev = self.events
        counters = SpecCounters(
            num_drafts=int((ev.position == 0).sum()),
            num_draft_tokens=len(ev),
            num_accepted_tokens=int(ev.accepted.sum()),
            accepted_per_position=tuple(int(x) for x in np.bincount(ev.position[ev.accepted])),
        )
        return counters.padded(self.spec.k).to_json()


@dataclass(frozen=True)
class Study:
    """A simulated study: the prompts, the target's outputs, and every run."""

    scenario: Scenario
    seed: int
    prompt_ids: list[str]
    pairs: list[str]
    langs: npt.NDArray[np.str_]
    length: I64  # output tokens per prompt
    tokens: I64  # (requests, width): output token ids (and what follows the output)
    script: npt.NDArray[np.int8]  # (requests, width): index into SCRIPT_NAMES
    score: F64  # (requests, width): deterministic (text) part of the confidence logit
    q: F64  # (requests, width): target's top-1 probability
    runs: list[SimRun] = field(repr=False)

    def run(self, label: str) -> SimRun:
        for r in self.runs:
            if r.spec.label == label:
                return r
        raise KeyError(label)

    def frame(self) -> pd.DataFrame:
        """The analysis frame: one row per draft event, every run (ESTIMATOR_SPEC.md columns)."""
        return pd.concat([self._frame(r) for r in self.runs], ignore_index=True)

    def _frame(self, run: SimRun) -> pd.DataFrame:
        ev = run.events
        has_out = ev.output_index >= 0
        safe = np.where(has_out, ev.output_index, 0)
        script = np.where(has_out, self.script[ev.request, safe], -1)
        q = np.where(has_out, self.q[ev.request, safe], np.nan)
        req_cat = pd.Categorical.from_codes(ev.request, categories=self.prompt_ids)
        return pd.DataFrame(
            {
                "run": run.spec.label,
                "method": run.spec.method,
                "k": run.spec.k,
                "request_id": req_cat,
                "prompt_id": req_cat,
                "pair": _codes(self.pairs, ev.request),
                "lang": pd.Categorical(self.langs[ev.request], categories=list(LANGS)),
                "step": ev.step,
                "position": ev.position,
                "accepted": ev.accepted,
                "judged": ev.judged,
                "script": pd.Categorical.from_codes(script, categories=list(SCRIPT_NAMES)),
                "top1_prob": q,
                "output_index": ev.output_index,
            }
        )


def _codes(values: Sequence[str], index: I64) -> pd.Categorical:
    cats = list(dict.fromkeys(values))
    lookup = pd.Index(cats).get_indexer(list(values))
    return pd.Categorical.from_codes(lookup[index], categories=cats)


def default_runs(sc: Scenario) -> tuple[RunSpec, ...]:
    """One run per drafter of the scenario at the scenario's k, labelled ``method-kK``."""
    return tuple(RunSpec(f"{d.method}-k{sc.k}", d.method, sc.k) for d in sc.drafters)


def committed_runs(ks: Sequence[int] = (1, 2, 3, 4, 5)) -> tuple[RunSpec, ...]:
    """The committed study's design: both drafters at every k of ``ks`` (with
    ``replay=True``, replayed from one trace as ``tokenlens demo --size full`` does)."""
    return tuple(RunSpec(f"{m}-k{k}", m, k) for m in ("draft_model", "ngram") for k in ks)


def simulate_study(
    sc: Scenario,
    n_pairs: int,
    seed: int,
    runs: Sequence[RunSpec] | None = None,
    replay: bool = False,
) -> Study:
    """A study of ``n_pairs`` JA/EN prompt pairs under ``sc``, one run per ``runs`` entry.

    Runs of the same drafter share its prompt effects (a rerun at another k is the
    same drafter on the same prompts); the request effects are drawn per run. With
    ``replay``, every run of a drafter shares one agreement sequence as well (request
    effects, streaks, offers): the runs are replays of one greedy trace at several k,
    which differ only in where the steps fall, as in the committed full study.
    """
    specs = tuple(runs) if runs is not None else default_runs(sc)
    ss = np.random.SeedSequence(seed)
    children = ss.spawn(_RUN0 + max(len(specs), len(sc.drafters)))
    width = sc.max_tokens + max(s.k for s in specs) + 1
    text = _text(sc, n_pairs, width, np.random.default_rng(children[_TEXT]))
    conf = _confidence(sc.confidence, text, np.random.default_rng(children[_CONF]))
    common_rng = np.random.default_rng(children[_COMMON])
    common = common_rng.standard_normal(len(text.langs))
    common_pair = common_rng.standard_normal(text.n_pairs)[text.pair_index]
    drafter_index = {d.method: j for j, d in enumerate(sc.drafters)}
    prompt_effects: dict[str, tuple[F64, F64, F64]] = {}
    for d in sc.drafters:
        g = np.random.default_rng(children[_DRAFTER0 + drafter_index[d.method]])
        own = g.standard_normal(len(text.langs))
        offer_u = g.standard_normal(len(text.langs))
        slope = g.standard_normal(len(text.langs))
        own_pair = g.standard_normal(text.n_pairs)[text.pair_index]
        # The translation pair's part (correlation pair_share between its two prompts),
        # shared across drafters as much as the prompt's own part is.
        mixed = np.sqrt(d.shared) * common + np.sqrt(1 - d.shared) * own
        mixed_pair = np.sqrt(d.shared) * common_pair + np.sqrt(1 - d.shared) * own_pair
        v = d.prompt_sd * (np.sqrt(d.pair_share) * mixed_pair + np.sqrt(1 - d.pair_share) * mixed)
        prompt_effects[d.method] = (v, offer_u, slope)
    sim_runs = []
    for i, spec in enumerate(specs):
        d = sc.drafter(spec.method)
        stream = drafter_index[d.method] if replay else i
        g = np.random.default_rng(children[_RUN0 + stream])
        sim_runs.append(
            _run(spec, d, text, conf, prompt_effects[d.method], g, width),
        )
    return Study(
        scenario=sc,
        seed=seed,
        prompt_ids=text.prompt_ids,
        pairs=text.pairs,
        langs=text.langs,
        length=text.length,
        tokens=text.tokens,
        script=text.script,
        score=conf.score,
        q=conf.q,
        runs=sim_runs,
    )


@dataclass(frozen=True)
class _Text:
    prompt_ids: list[str]
    pairs: list[str]
    langs: npt.NDArray[np.str_]
    pair_index: I64
    length: I64
    tokens: I64
    script: npt.NDArray[np.int8]
    stream_pos: I64  # (requests, width) positions in the language's stream

    @property
    def n_pairs(self) -> int:
        return int(self.pair_index.max()) + 1 if len(self.pair_index) else 0


@dataclass(frozen=True)
class _Conf:
    score: F64
    q: F64
    topic: F64  # per request: the pair's topic difficulty (standard normal)


def _text(sc: Scenario, n_pairs: int, width: int, rng: np.random.Generator) -> _Text:
    st = streams()
    u = rng.random(n_pairs)
    stop = rng.random((n_pairs, len(LANGS))) < sc.stop_share
    early = rng.integers(sc.min_tokens, sc.max_tokens, size=(n_pairs, len(LANGS)))
    lengths = np.where(stop, early, sc.max_tokens).astype(np.int64)
    n_req = n_pairs * len(LANGS)
    langs = np.tile(np.asarray(LANGS), n_pairs)
    pair_index = np.repeat(np.arange(n_pairs), len(LANGS))
    pos = np.zeros((n_req, width), dtype=np.int64)
    tokens = np.zeros((n_req, width), dtype=np.int64)
    script = np.zeros((n_req, width), dtype=np.int8)
    for li, lang in enumerate(LANGS):
        s = st[lang]
        starts = _starts(s, u)
        p = (starts[:, None] + np.arange(width)[None, :]) % len(s)
        rows = slice(li, n_req, len(LANGS))
        pos[rows] = p
        tokens[rows] = s.ids[p]
        script[rows] = _script_codes(s)[p]
    pairs = [f"sim-{g:05d}" for g in pair_index]
    prompt_ids = [f"{p}-{lang}" for p, lang in zip(pairs, langs, strict=True)]
    return _Text(
        prompt_ids=prompt_ids,
        pairs=pairs,
        langs=langs,
        pair_index=pair_index,
        length=lengths.reshape(-1),
        tokens=tokens,
        script=script,
        stream_pos=pos,
    )


def _starts(s: Stream, u: F64) -> I64:
    """First window start at or after quantile ``u`` of the stream (wrapping)."""
    ok = np.flatnonzero(s.can_start)
    at = np.searchsorted(ok, np.floor(u * len(s)).astype(np.int64))
    return ok[at % len(ok)]


@lru_cache(maxsize=8)
def _script_codes_cached(lang: str) -> npt.NDArray[np.int8]:
    s = streams()[lang]
    lookup = {name: i for i, name in enumerate(SCRIPT_NAMES)}
    return np.asarray([lookup[x] for x in s.script], dtype=np.int8)


def _script_codes(s: Stream) -> npt.NDArray[np.int8]:
    return _script_codes_cached(s.lang)


@lru_cache(maxsize=16)
def _stream_scores(weights: tuple[tuple[str, float], ...]) -> dict[str, tuple[F64, F64]]:
    """Per language: (own score, English score at the same quantile) of every token."""
    st = streams()
    w = dict(weights)
    en = st["en"].score(w)
    out = {}
    for lang in LANGS:
        own = st[lang].score(w)
        out[lang] = (own, rank_matched(own, en) if lang != "en" else own)
    return out


def _confidence(c: Confidence, text: _Text, rng: np.random.Generator) -> _Conf:
    n_req, width = text.tokens.shape
    n_pairs = text.n_pairs
    topic: F64 = np.asarray(rng.standard_normal(n_pairs), dtype=np.float64)[text.pair_index]
    prompt: F64 = np.asarray(rng.standard_normal(n_req), dtype=np.float64)
    white = rng.standard_normal((n_req, width))
    ar = _ar1(rng.standard_normal((n_req, width)), c.ar_rho)
    scores = _stream_scores(c.weights)
    score = np.zeros((n_req, width))
    for lang in LANGS:
        rows = text.langs == lang
        own, matched = scores[lang]
        p = text.stream_pos[rows]
        strength = c.ja_strength if lang == "ja" else 1.0
        offset = c.ja_offset if lang == "ja" else 0.0
        score[rows] = matched[p] + strength * (own[p] - matched[p]) + offset
    noise = np.sqrt(c.ar_share) * ar + np.sqrt(1.0 - c.ar_share) * white
    x = (
        c.intercept
        + score
        + c.pair_sd * topic[:, None]
        + c.prompt_sd * prompt[:, None]
        + c.noise_sd * noise
    )
    y = c.floor + np.logaddexp(0.0, x - c.floor)  # a soft lower bound on the logit
    q = np.maximum(expit(y), MIN_CONFIDENCE)
    return _Conf(score=score, q=q, topic=topic)


def _token_shift(text: _Text, weights: tuple[tuple[str, float], ...]) -> F64:
    """Per output position, sum of weight x feature of the token there (the stream's
    features, :mod:`tokenlens.testing.text`), in both languages."""
    st = streams()
    out = np.zeros(text.tokens.shape)
    w = dict(weights)
    for lang in LANGS:
        rows = text.langs == lang
        out[rows] = st[lang].score(w)[text.stream_pos[rows]]
    return out


def _ar1(eps: F64, rho: float) -> F64:
    """Stationary AR(1) with unit variance along axis 1, from standard normal ``eps``."""
    out = np.empty_like(eps)
    if eps.shape[1] == 0:
        return out
    out[:, 0] = eps[:, 0]
    scale = np.sqrt(1.0 - rho * rho)
    for t in range(1, eps.shape[1]):
        out[:, t] = rho * out[:, t - 1] + scale * eps[:, t]
    return out


def _run(
    spec: RunSpec,
    d: Drafter,
    text: _Text,
    conf: _Conf,
    effects: tuple[F64, F64, F64],
    rng: np.random.Generator,
    width: int,
) -> SimRun:
    n_req = len(text.langs)
    request = rng.standard_normal(n_req)
    latent = _ar1(rng.standard_normal((n_req, width)), d.rho)
    offer_latent = _ar1(rng.standard_normal((n_req, width)), d.offer_rho)
    prompt, offer_u, slope = effects
    lang_effect = np.asarray([d.effect(str(lang)) for lang in text.langs])
    lang_effect = lang_effect + np.where(lang_effect != 0.0, d.effect_sd * slope, 0.0)
    shift = lang_effect + prompt + d.request_sd * request + d.topic_load * conf.topic
    base = d.ceiling * conf.q**d.power
    if d.token_weights:
        prob = base ** np.exp(-(shift[:, None] + _token_shift(text, d.token_weights)))
    else:
        prob = base ** np.exp(-shift)[:, None]
    agree = ndtr(latent) < prob
    if d.offer >= 1.0:
        offer = np.ones((n_req, width), dtype=bool)
    else:
        pi = ndtr(ndtri(d.offer) + d.offer_prompt_sd * offer_u)
        offer = ndtr(offer_latent) < pi[:, None]
    keep = rng.random((n_req, width)) if d.position_decay < 1.0 else None
    events = speculate(agree, offer, text.length, spec.k, keep, d.position_decay)
    return SimRun(spec=spec, agree_prob=prob, agree=agree, offer=offer, events=events)
