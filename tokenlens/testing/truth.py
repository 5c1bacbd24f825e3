"""Ground truth of a scenario: population values of the estimands, and mechanism effects.

Two kinds of truth, computed without the code under test:

- **Population values** (:func:`population`): every estimand of the estimator's spec
  (ESTIMATOR_SPEC.md: acceptance per language, the judged gap, its three-way
  decomposition by pooled confidence deciles, the H2 difference in differences),
  evaluated by this module's own implementation of the definitions on a very large
  simulated population (default 20,000 prompt pairs). This is what a consistent
  estimator converges to, so coverage is measured against it.
- **Mechanism values** (:func:`mechanisms`): what the planted mechanisms do, by
  counterfactual with common random numbers (same seed, one mechanism switched
  off): ``h1_<family>`` is the Japanese judged acceptance of the family's run with
  the Japanese confidence process minus with the English one; ``lang_<family>`` the
  same for the family drafter's planted Japanese agreement shift at equal
  confidence (``lang_trained`` is H2). A gap between an estimand's population value
  and the mechanism it is read as (composition vs ``h1``, DiD vs ``lang_trained``)
  is an identification bias of the method, not noise.

Populations are simulated in chunks, so memory stays bounded.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from tokenlens.analysis.code_identity import code_text
from tokenlens.arrays import F64
from tokenlens.arrays import Mask as B
from tokenlens.engine.methods import FREE, family_of
from tokenlens.testing.scenarios import Scenario
from tokenlens.testing.simulate import RunSpec, Study, simulate_study

ESTIMANDS = (
    "acceptance_ja",
    "acceptance_en",
    "gap_trained",
    "gap_free",
    "composition_trained",
    "within_trained",
    "out_of_support_trained",
    "composition_free",
    "within_free",
    "out_of_support_free",
    "h2_did",
)
CONF_BINS = 20
"""Pooled quantile bins of the target's confidence (as the estimator uses)."""
CHUNK = 5000


def family(method: str) -> str:
    """``free`` for training-free drafters, ``trained`` for trained ones (the method table)."""
    return "free" if family_of(method) == FREE else "trained"


@dataclass(frozen=True)
class Rows:
    """Judged rows and all-row counts of a study, by family and language (0 = ja, 1 = en)."""

    fam: npt.NDArray[np.int8]  # judged rows: 0 trained, 1 free
    lang: npt.NDArray[np.int8]
    q: F64
    accepted: B
    all_rows: npt.NDArray[np.int64]  # (family, lang): every draft row
    all_accepted: npt.NDArray[np.int64]


def rows_of(study: Study) -> Rows:
    """The rows every estimand is a function of."""
    fam, lang, q, acc = [], [], [], []
    all_rows = np.zeros((2, 2), dtype=np.int64)
    all_acc = np.zeros((2, 2), dtype=np.int64)
    is_en = (study.langs == "en").astype(np.int8)
    for run in study.runs:
        f = 0 if family(run.spec.method) == "trained" else 1
        ev = run.events
        lang_ev = is_en[ev.request]
        np.add.at(all_rows[f], lang_ev, 1)
        np.add.at(all_acc[f], lang_ev, ev.accepted.astype(np.int64))
        # judged rows whose token is in the output (a draft judged past the end of the
        # output has no token to classify and no confidence: not a judged row here)
        j = ev.judged & (ev.output_index >= 0)
        qq = study.q[ev.request[j], ev.output_index[j]]
        fam.append(np.full(int(j.sum()), f, dtype=np.int8))
        lang.append(lang_ev[j])
        q.append(qq)
        acc.append(ev.accepted[j])
    return Rows(
        fam=np.concatenate(fam),
        lang=np.concatenate(lang),
        q=np.concatenate(q),
        accepted=np.concatenate(acc),
        all_rows=all_rows,
        all_accepted=all_acc,
    )


def concat(parts: list[Rows]) -> Rows:
    return Rows(
        fam=np.concatenate([p.fam for p in parts]),
        lang=np.concatenate([p.lang for p in parts]),
        q=np.concatenate([p.q for p in parts]),
        accepted=np.concatenate([p.accepted for p in parts]),
        all_rows=sum((p.all_rows for p in parts), np.zeros((2, 2), dtype=np.int64)),
        all_accepted=sum((p.all_accepted for p in parts), np.zeros((2, 2), dtype=np.int64)),
    )


def estimands(rows: Rows, min_count: int = 30, n_bins: int = CONF_BINS) -> dict[str, float | None]:
    """Every estimand of the spec from ``rows`` (None where it has no support).

    The definitions, implemented here independently of tokenlens.analysis: judged
    rates; bins = ``n_bins`` quantile bins of the target's top-1 probability pooled
    over all judged rows with a probability (both families, both languages; equal
    edges merged); a bin is in a
    comparison's support when each cell it uses has ``min_count`` rows;
    composition = sum (v_ja - v_en)(r_ja + r_en)/2, within = sum (v_ja + v_en)/2
    (r_ja - r_en) over supported bins with shares renormalised inside the support;
    out_of_support = gap - (in-support rate difference); DiD weights = mean of the
    four cells' in-support shares. Judged rows without a probability (runs without
    logprobs) count in the gap, and so in out_of_support.
    """
    out: dict[str, float | None] = dict.fromkeys(ESTIMANDS)
    for li, name in enumerate(("ja", "en")):
        n = rows.all_rows[0, li]
        out[f"acceptance_{name}"] = float(rows.all_accepted[0, li] / n) if n else None
    finite = np.isfinite(rows.q)
    levels = np.linspace(0.0, 1.0, n_bins + 1)
    edges = np.unique(np.quantile(rows.q[finite], levels)) if finite.any() else np.zeros(2)
    inner = edges[1:-1]
    bins = np.where(finite, np.searchsorted(inner, np.nan_to_num(rows.q), side="right"), -1)
    n_bins = len(inner) + 1
    count = np.zeros((2, 2, n_bins))
    acc = np.zeros((2, 2, n_bins))
    ok = bins >= 0
    np.add.at(count, (rows.fam[ok], rows.lang[ok], bins[ok]), 1)
    np.add.at(acc, (rows.fam[ok], rows.lang[ok], bins[ok]), rows.accepted[ok])
    rate = np.divide(acc, count, out=np.full_like(acc, np.nan), where=count > 0)
    for fi, fname in enumerate(("trained", "free")):
        totals = [(rows.fam == fi) & (rows.lang == li) for li in (0, 1)]
        if not all(t.any() for t in totals):
            continue
        r = [float(rows.accepted[t].mean()) for t in totals]
        gap = r[0] - r[1]
        out[f"gap_{fname}"] = gap
        support = (count[fi, 0] >= min_count) & (count[fi, 1] >= min_count)
        if not _enough(count[fi], support):
            continue
        v = count[fi][:, support] / count[fi][:, support].sum(axis=1, keepdims=True)
        rr = rate[fi][:, support]
        out[f"composition_{fname}"] = float(((v[0] - v[1]) * (rr[0] + rr[1]) / 2).sum())
        out[f"within_{fname}"] = float(((v[0] + v[1]) / 2 * (rr[0] - rr[1])).sum())
        in_support = float((v[0] * rr[0]).sum() - (v[1] * rr[1]).sum())
        out[f"out_of_support_{fname}"] = gap - in_support
    shared: B = np.asarray((count >= min_count).all(axis=(0, 1)), dtype=bool)
    if count.sum(axis=2).all() and all(_enough(count[f], shared) for f in (0, 1)):
        shares = count[:, :, shared] / count[:, :, shared].sum(axis=2, keepdims=True)
        w = shares.mean(axis=(0, 1))
        rr = rate[:, :, shared]
        did = (rr[0, 0] - rr[0, 1]) - (rr[1, 0] - rr[1, 1])
        out["h2_did"] = float((w * did).sum())
    return out


def _enough(count: F64, support: B) -> bool:
    """In-support rows are at least half of each language's rows with a probability."""
    inside = count[:, support].sum(axis=1)
    total = count.sum(axis=1)
    return bool(support.any() and (total > 0).all() and (inside >= 0.5 * total).all())


@dataclass(frozen=True)
class Design:
    """The runs of a simulated study: ``runs`` None is one run per drafter at the
    scenario's k; ``replay`` makes every run of a drafter a replay of one agreement
    sequence (:func:`tokenlens.testing.simulate.simulate_study`)."""

    runs: tuple[RunSpec, ...] | None = None
    replay: bool = False


DEFAULT_DESIGN = Design()


def _chunks(
    sc: Scenario, pairs: int, seed: int, design: Design = DEFAULT_DESIGN
) -> Iterator[Study]:
    done = 0
    i = 0
    while done < pairs:
        n = min(CHUNK, pairs - done)
        yield simulate_study(
            sc, n, seed=seed * 1_000_003 + i, runs=design.runs, replay=design.replay
        )
        done += n
        i += 1


def population(
    sc: Scenario, pairs: int = 20_000, seed: int = 10**6, design: Design = DEFAULT_DESIGN
) -> dict[str, float | None]:
    """Every estimand on ``pairs`` simulated prompt pairs (the population value)."""
    return estimands(concat([rows_of(s) for s in _chunks(sc, pairs, seed, design)]))


def _ja_judged(
    sc: Scenario, pairs: int, seed: int, design: Design = DEFAULT_DESIGN
) -> dict[str, float]:
    """Japanese judged acceptance per family (summed over the family's runs)."""
    acc = {"trained": 0, "free": 0}
    n = {"trained": 0, "free": 0}
    for study in _chunks(sc, pairs, seed, design):
        ja = study.langs == "ja"
        for run in study.runs:
            f = family(run.spec.method)
            ev = run.events
            sel = ev.judged & ja[ev.request]
            acc[f] += int(ev.accepted[sel].sum())
            n[f] += int(sel.sum())
    return {f: acc[f] / n[f] for f in acc if n[f]}


def mechanisms(
    sc: Scenario, pairs: int = 20_000, seed: int = 10**6, design: Design = DEFAULT_DESIGN
) -> dict[str, float]:
    """Effects of the planted mechanisms on Japanese judged acceptance, per family."""
    base = _ja_judged(sc, pairs, seed, design)
    no_h1 = _ja_judged(sc.with_confidence(ja_strength=0.0, ja_offset=0.0), pairs, seed, design)
    out = {f"h1_{f}": base[f] - no_h1[f] for f in base}
    for d in sc.drafters:
        f = family(d.method)
        off = _ja_judged(sc.with_drafter(d.method, lang_effect=()), pairs, seed, design)
        out[f"lang_{f}"] = base[f] - off[f]
    return out


CACHE = Path.home() / ".cache" / "tokenlens" / "testbed"


def truth(
    sc: Scenario,
    pairs: int = 20_000,
    seed: int = 10**6,
    cache: Path | None = CACHE,
    design: Design = DEFAULT_DESIGN,
) -> dict[str, dict[str, float | None]]:
    """``{"population": ..., "mechanism": ...}`` for ``sc``, cached on disk by its parameters."""
    tag = "" if design == DEFAULT_DESIGN else f"|{design!r}"
    key = hashlib.sha256(f"{_code_identity()}|{sc!r}|{pairs}|{seed}{tag}".encode()).hexdigest()[:16]
    path = cache / f"{sc.name}-{key}.json" if cache is not None else None
    if path is not None and path.is_file():
        data: dict[str, dict[str, float | None]] = json.loads(path.read_text(encoding="utf-8"))
        return data
    result: dict[str, dict[str, float | None]] = {
        "population": population(sc, pairs, seed, design),
        "mechanism": dict(mechanisms(sc, pairs, seed, design)),
    }
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(result, indent=1), encoding="utf-8")
    return result


def _code_identity() -> str:
    """Hash of the code the truths depend on (not its comments or docstrings): a changed
    simulator invalidates cached truths, a reworded docstring does not."""
    here = Path(__file__).resolve().parent
    h = hashlib.sha256()
    for name in ("text", "scenarios", "simulate", "step_process", "truth"):
        h.update(code_text((here / f"{name}.py").read_text(encoding="utf-8")).encode())
    return h.hexdigest()[:16]


__all__ = [
    "DEFAULT_DESIGN",
    "ESTIMANDS",
    "Design",
    "Rows",
    "estimands",
    "mechanisms",
    "population",
    "truth",
]
