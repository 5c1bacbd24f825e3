"""The Japanese − English gap per domain (chat, code, news, translation, ...).

A pooled "no deficit" can hide a real deficit in one kind of text, so for each drafter
family this gives, per domain (``tags.domain`` of the prompt file given with
``--prompts``):

- the judged gap JA − EN with its 95% prompt-pair interval (the same bootstrap
  replicates as every figure: a domain's interval rests on its own pairs);
- its reading against −δ on a Bonferroni-adjusted decision interval (level
  1 − 2α/D for D domains: D readings are made, and one of them misreading by chance
  must stay at α), and whether it *departs* from the pooled reading (the pooled gap
  reads no deficit while the domain reads a deficit beyond δ, or the reverse). A
  domain whose estimate lies on the other side of −δ but whose adjusted interval
  reaches across it is listed under ``concerns``: the pooled reading does not hold
  for it on its own, nor is the opposite shown;
- a test of heterogeneity across domains: a permutation test. The statistic is the
  row-weighted between-domain variance of the judged gap, Σ_d n_d (gap_d − gap)² / Σ_d n_d;
  its null distribution comes from reassigning the domain labels to the prompt pairs
  at random (9,999 times, seeded), each pair kept whole (both languages, every run).

Why a permutation test and not a random-effects estimate of the between-domain spread:
the study has 7–8 domains of 6–12 pairs each. DerSimonian–Laird would estimate the
spread from within-domain variances that rest on 5–11 clusters each and refer
Cochran's Q to a χ² distribution it only approximates at that size; the permutation test
needs neither a variance estimate nor normality, respects the unit of evidence (the
prompt pair) and answers the question asked: do the domains differ more than random
groupings of the same pairs would? The spread itself is reported descriptively
(``spread``: the weighted SD of the domain gaps, next to ``chance_spread``, its median
under the permutations).

Cross-lingual domains (prompts tagged ``tags.direction``: translation, where the
Japanese prompts translate English sources into Japanese, ``en-ja``, and the English
prompts Japanese sources into English, ``ja-en``) carry their ``direction`` per
language: there the two outputs of a pair are not written from the same source, so
the test is also given without them (``heterogeneity_without_cross_lingual``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import numpy as np
import pandas as pd

from tokenlens.analysis.bootstrap import Resampler, as_float, estimate, interval
from tokenlens.analysis.breakdown import group_codes
from tokenlens.analysis.decompose import lang_code
from tokenlens.analysis.rules import NO, UNSURE, YES, Rules, tri
from tokenlens.analysis.summary_figures import Estimate
from tokenlens.analysis.summary_sections import (
    DomainFamily,
    DomainGap,
    DomainNote,
    Domains,
    Heterogeneity,
)
from tokenlens.arrays import F64, I64, Mask

PERMUTATIONS = 9999
TEST = "permutation of the domain labels over prompt pairs"
STATISTIC = "row-weighted between-domain variance of the judged gap"
WHY = (
    "7-8 domains of 6-12 prompt pairs: a random-effects (DerSimonian-Laird) spread would "
    "rest on within-domain variances from 5-11 clusters each and on a chi-square "
    "approximation to Cochran's Q; the permutation test needs neither, keeps each pair "
    "whole, and asks whether domains differ more than random groupings of the same pairs"
)


def domain_section(
    frame: pd.DataFrame,
    rs: Resampler,
    families: dict[str, Mask],
    judged: Mask,
    pooled: Mapping[str, Estimate | None],
    rules: Rules,
    seed: int,
    source: str,
) -> Domains:
    """summary.json ``domains``: per drafter family (``families``: row masks), the judged
    gap per domain read against −δ, set beside the family's ``pooled`` gap, and the
    heterogeneity test; ``source`` says where the domain labels come from."""
    return Domains(
        source=source,
        families={
            name: _family(frame, rs, judged & mask, pooled.get(name), rules, seed)
            for name, mask in families.items()
        },
    )


def _family(
    frame: pd.DataFrame,
    rs: Resampler,
    rows: Mask,
    pooled: Estimate | None,
    rules: Rules,
    seed: int,
) -> DomainFamily:
    code = lang_code(frame)
    dcode, labels = group_codes(frame, "domain")
    n_d = len(labels)
    keep = rows & (code >= 0) & (dcode >= 0)
    cell = np.where(keep, code * n_d + dcode, -1)
    acc = frame["accepted"].to_numpy(dtype=np.float64)
    num, den, _ = rs.counted(acc, cell, 2 * n_d, keep)
    by_domain = rs.cells(np.where(keep, dcode, -1), n_d, keep)
    pairs = by_domain.clusters()
    with np.errstate(divide="ignore", invalid="ignore"):
        point = num.point[:n_d] / den.point[:n_d] - num.point[n_d:] / den.point[n_d:]
        boot = num.boot[:, :n_d] / den.boot[:, :n_d] - num.boot[:, n_d:] / den.boot[:, n_d:]
    g, h = rs.design_of(by_domain)
    filled = [d for d in range(n_d) if den.point[d] > 0 and den.point[n_d + d] > 0]
    m = max(len(filled), 1)
    adjusted = 1.0 - 2.0 * rules.alpha / m
    lo, hi = interval(point, boot, g, h, rs.method, rs.level)
    d_lo, d_hi = interval(point, boot, g, h, rs.method, rules.decision_level)
    a_lo, a_hi = interval(point, boot, g, h, rs.method, adjusted)
    pooled_reading = tri(pooled.to_json(), rules.delta) if pooled else None
    cross = _directions(frame, keep, code, dcode, labels)
    domains: dict[str, DomainGap] = {}
    departures = []
    concerns = []
    for d in filled:
        figure = estimate(point[d], lo[d], hi[d], int(den.point[d] + den.point[n_d + d]))
        adjusted_low, adjusted_high = as_float(a_lo[d]), as_float(a_hi[d])
        reading = tri({"decision_low": adjusted_low, "decision_high": adjusted_high}, rules.delta)
        domains[labels[d]] = DomainGap(
            value=figure.value,
            ci_low=figure.ci_low,
            ci_high=figure.ci_high,
            n=figure.n,
            not_estimable=figure.not_estimable,
            no_interval=figure.no_interval,
            pairs=int(pairs[d]),
            rows_ja=int(den.point[d]),
            rows_en=int(den.point[n_d + d]),
            rate_ja=as_float(num.point[d] / den.point[d]),
            rate_en=as_float(num.point[n_d + d] / den.point[n_d + d]),
            decision_low=as_float(d_lo[d]),
            decision_high=as_float(d_hi[d]),
            adjusted_low=adjusted_low,
            adjusted_high=adjusted_high,
            reading=reading,
            direction=cross.get(labels[d]),
        )
        note = DomainNote(domain=labels[d], reading=reading, pooled_reading=pooled_reading)
        if pooled_reading is not None and {reading, pooled_reading} == {YES, NO}:
            departures.append(note)
        elif reading == UNSURE and (
            (pooled_reading == NO and point[d] < -rules.delta)
            or (pooled_reading == YES and point[d] > -rules.delta)
        ):
            concerns.append(note)
    without = None
    if cross:
        # the cross-lingual domains are the only ones whose Japanese and English outputs
        # are not written from the same source: the test without them too
        left_out = sorted(cross)
        same_source = keep & ~np.isin(dcode, [labels.index(x) for x in left_out])
        test = heterogeneity(frame, rs, same_source, code, dcode, n_d, seed)
        without = dataclasses.replace(test, left_out=tuple(left_out))
    return DomainFamily(
        adjusted_level=adjusted,
        domains=domains,
        pooled=pooled,
        pooled_reading=pooled_reading,
        departures=tuple(departures),
        concerns=tuple(concerns),
        heterogeneity=heterogeneity(frame, rs, keep, code, dcode, n_d, seed),
        heterogeneity_without_cross_lingual=without,
    )


def _directions(
    frame: pd.DataFrame, keep: Mask, code: I64, dcode: I64, labels: list[str]
) -> dict[str, dict[str, str]]:
    """``{domain: {lang: direction}}`` for the domains whose prompts carry
    ``tags.direction`` (cross-lingual: each language's output translates the other
    language's source, e.g. ja: ``en-ja``, en: ``ja-en``)."""
    if "direction" not in frame:
        return {}
    direction = frame["direction"].astype(str).to_numpy()
    tagged = keep & frame["direction"].notna().to_numpy()
    out: dict[str, dict[str, str]] = {}
    for d, label in enumerate(labels):
        for li, lang in enumerate(("ja", "en")):
            found = sorted(set(direction[tagged & (dcode == d) & (code == li)]))
            if found:
                out.setdefault(label, {})[lang] = "+".join(found)
    return out


def _statistic(a_ja: F64, n_ja: F64, a_en: F64, n_en: F64) -> tuple[F64, F64]:
    """(weighted between-domain variance, total weight) per row of domain totals
    (shape (..., D)); domains without rows in a language carry no weight."""
    with np.errstate(divide="ignore", invalid="ignore"):
        gap = a_ja / n_ja - a_en / n_en
    w = np.where(np.isfinite(gap), n_ja + n_en, 0.0)
    gap = np.where(np.isfinite(gap), gap, 0.0)
    total = w.sum(-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = (w * gap).sum(-1) / total
        var = (w * (gap - mean[..., None]) ** 2).sum(-1) / total
    return np.asarray(var, dtype=np.float64), np.asarray(total, dtype=np.float64)


def heterogeneity(
    frame: pd.DataFrame,
    rs: Resampler,
    keep: Mask,
    code: I64,
    dcode: I64,
    n_d: int,
    seed: int,
    permutations: int = PERMUTATIONS,
) -> Heterogeneity:
    """The permutation test of equal gaps across domains over the ``keep`` rows (module
    docstring); ``not_estimable`` (why) without paired prompts or two domains."""
    base = Heterogeneity(test=TEST, statistic=STATISTIC, why=WHY)
    if rs.unit != "prompt pair":
        why = "needs paired prompts (a pair is what is permuted)"
        return dataclasses.replace(base, not_estimable=why)
    clusters = rs.cluster[keep]
    domain_of = np.full(rs.n_clusters, -1, dtype=np.int64)
    domain_of[clusters] = dcode[keep]
    mixed = np.zeros(rs.n_clusters, dtype=bool)
    mixed[clusters[dcode[keep] != domain_of[clusters]]] = True
    if mixed.any():
        why = "a prompt pair's two prompts have different domains"
        return dataclasses.replace(base, not_estimable=why)
    used = np.flatnonzero(domain_of >= 0)
    if len(np.unique(domain_of[used])) < 2:
        return dataclasses.replace(base, not_estimable="fewer than two domains")
    acc = frame["accepted"].to_numpy(dtype=np.float64)
    per = []
    for lang in (0, 1):
        cells = rs.cells(np.where(keep & (code == lang), 0, -1), 1, keep)
        per += [cells.sums(acc)[used, 0], cells.counts()[used, 0]]
    a_ja, n_ja, a_en, n_en = per
    labels = domain_of[used]

    def sums(lab: I64) -> tuple[F64, ...]:
        b = lab.shape[0] if lab.ndim == 2 else 1
        flat = (np.arange(b)[:, None] * n_d + lab.reshape(b, -1)).ravel()
        return tuple(
            np.asarray(
                np.bincount(flat, weights=np.tile(x, b), minlength=b * n_d), dtype=np.float64
            ).reshape(b, n_d)
            for x in (a_ja, n_ja, a_en, n_en)
        )

    observed, total = _statistic(*sums(labels))
    rng = np.random.default_rng([seed, 24])
    perms = rng.permuted(np.tile(labels, (permutations, 1)), axis=1)
    null, _ = _statistic(*sums(perms))
    value = float(observed[0])
    p = (1.0 + float((null >= value - 1e-15).sum())) / (1.0 + permutations)
    return dataclasses.replace(
        base,
        value=value,
        spread=float(np.sqrt(value)),
        chance_spread=float(np.sqrt(np.median(null))),
        p=p,
        permutations=permutations,
        domains=len(np.unique(labels)),
        pairs=len(used),
        rows=int(total[0]),
    )
