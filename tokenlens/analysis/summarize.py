"""Every figure of summary.json from one frame of joined events.

:func:`summarize` takes the frame, the runs' :class:`RunInfo` and the options, and
returns summary.json's content (the signature and ``inputs`` are the pipeline's), every
interval from one seeded prompt-clustered bootstrap. Each section is a record of the
one schema (:mod:`~tokenlens.analysis.summary_file` and its section modules), typed
where it is assembled (:func:`typed`) and written by its ``to_json``. The test bed calls
it on simulated frames, so the numbers it checks are the ones users get.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from tokenlens import __version__
from tokenlens.analysis.bootstrap import LEVEL, Resampler
from tokenlens.analysis.breakdown import (
    BREAKDOWNS,
    group_codes,
    per_lang,
    positions,
    rates,
    row_mask,
    text_per_step,
)
from tokenlens.analysis.classes import class_gaps
from tokenlens.analysis.columns import labels
from tokenlens.analysis.config import AnalyzeConfig
from tokenlens.analysis.decompose import CONF_BINS, decompose, has_pair
from tokenlens.analysis.domains import domain_section
from tokenlens.analysis.explore import class_differences
from tokenlens.analysis.gap import gap, regression
from tokenlens.analysis.rejection_summary import rejection_section
from tokenlens.analysis.rules import FREE, INCONCLUSIVE, POWER, TRAINED, Rules
from tokenlens.analysis.sensitivity import add_sensitivity
from tokenlens.analysis.speed import default_cost, margin_in_speed, speed_model
from tokenlens.analysis.standardise import COLUMN as LENGTH_COLUMN
from tokenlens.analysis.standardise import length_split, length_standardised
from tokenlens.analysis.summary_fields import json_value, typed
from tokenlens.analysis.summary_figures import Estimate
from tokenlens.analysis.summary_file import Scope, Settings, SupportRules
from tokenlens.analysis.summary_gaps import Contrast, Family, Gap
from tokenlens.analysis.summary_runs import RunSummary
from tokenlens.analysis.summary_sections import MarginInSpeed, Rejections, SpeedMargin
from tokenlens.analysis.summary_verdicts import Hypothesis
from tokenlens.analysis.token_classes import decomposed
from tokenlens.analysis.verdicts import (
    compute_parts,
    configurations,
    decide,
    families,
    rules_identity,
)
from tokenlens.engine.methods import family_of
from tokenlens.format_version import ANALYSIS, stamp

DESCRIBE_BY = decomposed()  # from the token-class table, in the decomposition's order


@dataclass(frozen=True)
class RunInfo:
    """What the summary says about each input run."""

    label: str
    path: str
    method: str
    k: int
    signature: str
    status: str
    metrics: dict[str, Any]
    reconciliation: dict[str, Any] | None = None
    replayed_from: str | None = None
    # Why no verdict may rest on this run (an approximate replay nothing vouches for).
    unvouched: str | None = None
    # Where the run's numbers come from (dtype, weights, the trace a replay came from):
    # written into its runs[] section for FINDINGS' provenance (:func:`provenance`).
    provenance: dict[str, Any] = field(default_factory=dict)


def summarize(
    frame: pd.DataFrame,
    infos: Sequence[RunInfo],
    config: AnalyzeConfig,
    costs: Mapping[str, tuple[float, str]] | None = None,
) -> dict[str, Any]:
    """Every figure of summary.json from one joined (or simulated) frame."""
    rules = Rules(delta=config.delta, min_prompts=config.min_prompts, alpha=config.alpha)
    rs = Resampler.from_frame(
        frame,
        config.n_boot,
        config.seed,
        method=config.interval,
        decision_level=rules.decision_level,
    )
    judged = row_mask(frame, "judged")
    parts = compute_parts(frame, rs, config.support, rules.control_range)
    fams = families(frame)
    for name, block in parts.families.items():
        if "gap_judged" in block:  # beside the judged gap, and read by the sensitivity
            block["gap_length_standardised"] = length_standardised(
                frame, rs, judged & fams[name], config.support
            )
    scope_name = TRAINED if TRAINED in fams else FREE
    scope = fams.get(scope_name, np.ones(len(frame), dtype=bool))
    configs = configurations(frame, scope)
    out: dict[str, Any] = {
        **stamp(ANALYSIS),
        "signature": None,
        "tokenlens_version": __version__,
        "settings": _settings(config, rules, rs),
        "scope": _scope(frame, scope_name, scope, configs),
        "prompts": parts.prompts,
        "acceptance": per_lang(frame, rs, scope, config.min_count),
        "acceptance_judged": per_lang(frame, rs, judged & scope, config.min_count),
    }
    unconditional, conditional = (
        positions(frame, rs, scope, config.min_count) if len(configs) == 1 else ({}, {})
    )
    out["by_position"] = unconditional
    for b in BREAKDOWNS:
        if b.column in frame:
            rows = scope if b.rows == "all" else judged & scope
            out[b.name] = rates(frame, rs, b.column, rows, config.min_count)
    out["by_position_conditional"] = conditional
    out["text_per_step"] = text_per_step(frame, rs, scope)
    out["families"] = parts.families
    out["acceptance_per_k"] = acceptance_per_k(frame, rs, fams, config.min_count)
    label_pooled(out, frame, fams, scope_name)
    out["h2_contrast"] = parts.contrast
    out["gap"] = _gap_section(frame, rs, judged, config)
    out["hypotheses"] = refuse_unvouched(decide(frame, rs, rules, parts), infos)
    if config.details:
        add_sensitivity(out["hypotheses"], frame, rs, rules, config.support, parts)
        out["classes"] = class_gaps(frame, rs, fams, judged, config.support, config.min_count)
        out["rejections"] = rejection_section(frame, rs, fams)
        if "bytes_bucket" in frame:
            out["byte_length"] = {
                name: {
                    "runs": sorted(set(labels(frame, "run")[mask])),
                    "configurations": configurations(frame, mask),
                    "rates": rates(frame, rs, "bytes_bucket", judged & mask, config.min_count),
                }
                for name, mask in fams.items()
            }
        if "domain" in frame:
            # the families' gaps are still dicts (issue 34): each read as its record here
            pooled = {
                name: Estimate.parse(block.get("gap_judged"))
                for name, block in parts.families.items()
            }
            # the file's name, not its path: summary.json travels (committed samples)
            source = f"tags.domain of {config.prompts.name}" if config.prompts else "tags.domain"
            out["domains"] = domain_section(
                frame, rs, fams, judged, pooled, rules, config.seed, source
            )
    out["runs"] = [
        _run_section(frame, rs, info, config, (costs or {}).get(info.method)) for info in infos
    ]
    out["margin_in_speed"] = _margin_in_speed(out["runs"], rules.delta, config.method_families)
    _type_sections(out)
    written: dict[str, Any] = json_value(out)  # the records as their types write them
    return written


def _type_sections(out: dict[str, Any]) -> None:
    """Each section still assembled from the figures' builders as a block
    (``families``, ``h2_contrast``, ``gap``, ``hypotheses``, ``rejections``, ``runs``)
    turned, in place, into its record (:func:`typed`)."""
    out["families"] = {
        name: typed(Family, block, name=name) for name, block in out["families"].items()
    }
    out["h2_contrast"] = typed(Contrast, out["h2_contrast"])
    out["gap"] = typed(Gap, out["gap"])
    out["hypotheses"] = {name: typed(Hypothesis, h) for name, h in out["hypotheses"].items()}
    if "rejections" in out:
        out["rejections"] = typed(Rejections, out["rejections"])
    out["runs"] = [typed(RunSummary, run) for run in out["runs"]]


def _settings(config: AnalyzeConfig, rules: Rules, rs: Resampler) -> Settings:
    """The options and rules this analysis ran with (summary.json ``settings``)."""
    support = config.support
    return Settings(
        seed=config.seed,
        bootstrap=config.n_boot,
        level=LEVEL,
        interval=config.interval,
        cluster=rs.unit,
        clusters=rs.n_clusters,
        min_count=config.min_count,
        confidence_bins=CONF_BINS,
        support=SupportRules(support.min_rows, support.min_prompts, support.min_support),
        delta=rules.delta,
        alpha=rules.alpha,
        decision_level=rules.decision_level,
        min_prompts=rules.min_prompts,
        power=POWER,
        power_effects=tuple(rules.power_effects),
        control_range=rules.control_range,
        rules_hash=rules_identity(rules, config.support),
    )


def _margin_in_speed(
    runs: Sequence[Mapping[str, Any]], delta: float, declared: Mapping[str, str] | None = None
) -> MarginInSpeed:
    """δ in speed terms per drafter family and k (:func:`margin_in_speed`), at the
    English judged rate of the runs of that k (the reference a Japanese deficit is
    measured from)."""
    seen: dict[tuple[str, int], list[float]] = {}
    for run in runs:
        rate = ((run.get("acceptance_judged") or {}).get("en") or {}).get("rate")
        if rate is None:
            continue
        family = family_of(run["method"], declared)
        seen.setdefault((family, int(run["k"])), []).append(float(rate))
    families: dict[str, dict[str, SpeedMargin]] = {}
    for (family, k), values in sorted(seen.items()):
        families.setdefault(family, {})[str(k)] = margin_in_speed(float(np.mean(values)), k, delta)
    return MarginInSpeed(
        basis="English judged acceptance of the runs at each k; tokens per step by the "
        "i.i.d. formula (1 - a^(k+1)) / (1 - a) (Leviathan et al. 2023)",
        families=families,
    )


def acceptance_per_k(
    frame: pd.DataFrame, rs: Resampler, fams: Mapping[str, Any], min_count: int
) -> dict[str, dict[str, dict[str, Any]]]:
    """vLLM's rate per drafter family and k: ``{family: {k: {lang: rate}}}`` (the
    pooled ``acceptance`` split, so that no reader has to take a rate over k = 1..5)."""
    ks = frame["k"].to_numpy() if "k" in frame else np.zeros(len(frame), dtype=np.int64)
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for name, mask in fams.items():
        out[name] = {
            str(k): per_lang(frame, rs, mask & (ks == k), min_count)
            for k in sorted({int(x) for x in ks[mask]})
        }
    return out


def label_pooled(
    out: dict[str, Any], frame: pd.DataFrame, fams: Mapping[str, Any], scope: str
) -> None:
    """Mark, in place, every per-language figure that pools runs of several k with
    ``pooled_over_k`` and ``family``: the top-level acceptance and text per step (the
    ``scope`` family's) and each family's rates and gaps. Per-k figures are in
    ``acceptance_per_k`` and ``runs[]``."""
    ks_all = frame["k"].to_numpy() if "k" in frame else np.zeros(len(frame), dtype=np.int64)

    def mark(figure: Any, ks: list[int], family: str) -> None:
        if isinstance(figure, dict) and figure:
            figure.update(pooled_over_k=ks, family=family)

    for name, mask in fams.items():
        ks = [int(x) for x in np.unique(ks_all[mask])]
        if len(ks) < 2:
            continue
        block = out["families"].get(name) or {}
        for key in ("acceptance", "acceptance_judged"):
            for figure in (block.get(key) or {}).values():
                mark(figure, ks, name)
        for key in ("gap_judged", "gap_all", "gap_length_standardised"):
            mark(block.get(key), ks, name)
        if name != scope:
            continue
        for key in ("acceptance", "acceptance_judged"):
            for figure in (out.get(key) or {}).values():
                mark(figure, ks, name)
        for per_lang_block in (out.get("text_per_step") or {}).values():
            for figure in per_lang_block.values():
                mark(figure, ks, name)


def refuse_unvouched(hypotheses: dict[str, Any], infos: Sequence[RunInfo]) -> dict[str, Any]:
    """No verdict from approximate replays that no check trace vouches for
    (:mod:`tokenlens.replay.trust`): each hypothesis becomes inconclusive, says why, and
    keeps its figures."""
    reasons = [f"{info.label}: {info.unvouched}" for info in infos if info.unvouched]
    if not reasons:
        return hypotheses
    out = {}
    for name, h in hypotheses.items():
        out[name] = {
            **h,
            "verdict": INCONCLUSIVE,
            "refused": reasons,
            "evidence": (
                f"No verdict: {len(reasons)} analysed run(s) are approximate replays that "
                f"no check trace vouches for ({reasons[0]}). {h.get('evidence', '')}"
            ).strip(),
        }
    return out


def _scope(
    frame: pd.DataFrame, family: str, mask: np.ndarray[Any, Any], configs: list[list[Any]]
) -> dict[str, Any]:
    """summary.json ``scope``: the one drafter family the per-language sections at the
    top describe (never two: pooling them would weigh each method by its share of rows),
    its runs, their (method, k) and what is pooled."""
    runs = sorted(set(labels(frame, "run")[mask]))
    ks = sorted({int(k) for _, k in configs})
    if len(configs) == 1:
        note = "one run configuration: nothing is pooled across drafters or k."
    else:
        note = (
            f"pooled over the {family.replace('_', '-')} family's runs at k = "
            + ", ".join(str(k) for k in ks)
            + ": the judged-position figures (acceptance_judged, the by_* class "
            "breakdowns) as the verdicts read them; vLLM's all-draft-token rate "
            "(acceptance) and text_per_step depend on k, so read them per run (runs[]) or "
            "per family and k (acceptance_per_k); every figure pooled over k says so "
            "(pooled_over_k, family); "
            "by_position and by_position_conditional exist per run only (runs[])."
        )
    others = sorted(set(labels(frame, "run")[~mask]))
    if others:
        listed = ", ".join(others)
        note += f" The other drafter family's runs ({listed}) are in families and runs[]."
    scope = Scope(
        family=family,
        runs=tuple(runs),
        configurations=tuple((str(m), int(k)) for m, k in configs),
        left_out=tuple(others),
        note=note,
    )
    return scope.to_json()


def _gap_section(
    frame: pd.DataFrame, rs: Resampler, judged: np.ndarray[Any, Any], config: AnalyzeConfig
) -> dict[str, Any] | None:
    """summary.json ``gap``: the gap of the primary family (trained drafters when
    present, never pooled across families) and its descriptive splits; None without
    that family or without both languages."""
    fams = families(frame)
    family = TRAINED if TRAINED in fams else FREE if FREE in fams else None
    if family is None:
        return None
    mask = fams[family]
    rows = judged & mask
    if not has_pair(frame, rows):
        return None
    section: dict[str, Any] = {
        "family": family,
        "overall": gap(frame, rs, mask),
        "judged": gap(frame, rs, rows),
        "relative_judged": gap(frame, rs, rows, relative=True),
        "decomposition": {},
    }
    for column in DESCRIBE_BY:
        if column in frame:
            codes, labels = group_codes(frame, column)
            dec = decompose(frame, rs, codes, labels, rows, config.support, column)
            if dec is not None:
                section["decomposition"][column] = dec
    by_length = length_split(frame, rs, rows, config.support)
    if by_length is not None:
        section["decomposition"][LENGTH_COLUMN] = by_length
    section["explore"] = class_differences(
        frame, rs, fams, judged, config.support, config.min_count
    )
    if config.regression:
        section["regression"] = regression(frame, "script", rows, config.min_count, config.seed)
    return section


def _run_section(
    frame: pd.DataFrame,
    rs: Resampler,
    info: RunInfo,
    config: AnalyzeConfig,
    cost: tuple[float, str] | None,
) -> dict[str, Any]:
    mine = labels(frame, "run") == info.label
    sub_judged = mine & row_mask(frame, "judged")
    acceptance = per_lang(frame, rs, mine, config.min_count)
    judged_rate = per_lang(frame, rs, sub_judged, config.min_count)
    unconditional, conditional = positions(frame, rs, mine, config.min_count)
    section: dict[str, Any] = {
        "label": info.label,
        "path": info.path,
        "method": info.method,
        "k": info.k,
        "signature": info.signature,
        "status": info.status,
        "replayed": info.replayed_from is not None,
        "replayed_from": info.replayed_from,
        "reconciliation": {**(info.reconciliation or {"matches": None}), "vllm": info.metrics},
        "acceptance": acceptance,
        "acceptance_judged": judged_rate,
        "by_position": unconditional,
        "by_position_conditional": conditional,
        "text_per_step": text_per_step(frame, rs, mine),
        **info.provenance,
    }
    if has_pair(frame, mine):
        section["gap"] = gap(frame, rs, mine)
        section["relative_gap_judged"] = gap(frame, rs, sub_judged, relative=True)
    if cost is not None:
        used_cost, cost_source, measured = cost[0], cost[1], True
    else:
        family = family_of(info.method, config.method_families)
        used_cost, cost_source, measured = default_cost(family), "assumed default", False
    lang_of = labels(frame, "lang")
    first = frame["position"].to_numpy() == 0
    speed = {}
    for lang, block in acceptance.items():
        # vLLM's a_p (accepted at p / all drafts): 1 + the sum is tokens per step
        at = unconditional.get(lang, {})
        curve = [(at[str(p)].per_draft if str(p) in at else None) or 0.0 for p in range(info.k)]
        steps = int((mine & first & (lang_of == lang)).sum())
        tps = 1.0 + block["accepted"] / steps if steps else None
        iid = (judged_rate.get(lang) or {}).get("rate") or 0.0
        speed[lang] = speed_model(curve, iid, info.k, used_cost, tps, cost_measured=measured)
    section["speed"] = {
        "draft_cost_source": cost_source,
        "draft_cost": used_cost,
        "draft_cost_measured": measured,
        "by_lang": speed,
    }
    return section
