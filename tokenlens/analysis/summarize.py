"""Every figure of summary.json from one frame of joined events.

:func:`summarize` takes the frame, the runs' :class:`RunInfo` and the options, and
returns summary.json's content (the signature and ``inputs`` are the pipeline's), every
interval from one seeded prompt-clustered bootstrap. Each section is a record of the
one schema (:mod:`~tokenlens.analysis.summary_file` and its section modules), typed
where it is assembled (:func:`typed`) and written by its ``to_json``. The test bed calls
it on simulated frames, so the numbers it checks are the ones users get. With
``jobs`` of 2 or more, two sections no other reads (``gap``, ``rejections``) are
computed in a forked process beside the others (:func:`_aside`), with the same result.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any, TypeVar

import numpy as np
import pandas as pd

from tokenlens import __version__
from tokenlens.analysis.bootstrap import LEVEL, Resampler
from tokenlens.analysis.breakdown import (
    BREAKDOWNS,
    per_lang,
    positions,
    rates,
    row_mask,
    text_per_step,
)
from tokenlens.analysis.classes import class_gaps
from tokenlens.analysis.columns import labels, remembered
from tokenlens.analysis.config import AnalyzeConfig
from tokenlens.analysis.decompose import CONF_BINS
from tokenlens.analysis.domains import domain_section
from tokenlens.analysis.forked import Beside, beside, default_jobs
from tokenlens.analysis.gap_section import fit, gap_section
from tokenlens.analysis.memory import give_back_memory
from tokenlens.analysis.parts import compute_parts, configurations, families
from tokenlens.analysis.rejection_summary import rejection_section
from tokenlens.analysis.rules import FREE, INCONCLUSIVE, POWER, TRAINED, Rules
from tokenlens.analysis.run_section import RunInfo as RunInfo
from tokenlens.analysis.run_section import margin_section, run_section
from tokenlens.analysis.sensitivity import add_sensitivity
from tokenlens.analysis.standardise import length_standardised
from tokenlens.analysis.summary_fields import json_value, typed
from tokenlens.analysis.summary_figures import (
    Estimate,
    LengthStandardised,
    Rate,
)
from tokenlens.analysis.summary_file import Scope, Settings, SupportRules
from tokenlens.analysis.summary_gaps import Family, Gap
from tokenlens.analysis.summary_sections import Rejections
from tokenlens.analysis.summary_verdicts import Hypothesis
from tokenlens.analysis.verdicts import decide, rules_identity
from tokenlens.arrays import Mask
from tokenlens.format_version import ANALYSIS, stamp

E = TypeVar("E", bound=Estimate)
R = TypeVar("R")


def summarize(
    frame: pd.DataFrame,
    infos: Sequence[RunInfo],
    config: AnalyzeConfig,
    costs: Mapping[str, tuple[float, str]] | None = None,
) -> dict[str, Any]:
    """Every figure of summary.json from one joined (or simulated) frame."""
    with remembered(), one_blas_thread():  # each non-categorical label converted once
        return _summarize(frame, infos, config, costs)


@contextlib.contextmanager
def one_blas_thread() -> Iterator[None]:
    """BLAS (OpenBLAS, MKL) on one thread while the figures are computed: the logistic
    model's fit sums in an order that depends on BLAS's number of threads, so its last
    digits would depend on the machine's cores (and on ``--jobs``: the aside process,
    below). The bootstrap's sums are exact either way. BLAS's threads gave the figures
    no speed: their second thread spun (docs/analysis.md, "Seventh pass")."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"):
        yield


def _summarize(
    frame: pd.DataFrame,
    infos: Sequence[RunInfo],
    config: AnalyzeConfig,
    costs: Mapping[str, tuple[float, str]] | None,
) -> dict[str, Any]:
    rules = Rules(delta=config.delta, min_prompts=config.min_prompts, alpha=config.alpha)
    rs = Resampler.from_frame(
        frame,
        config.n_boot,
        config.seed,
        method=config.interval,
        decision_level=rules.decision_level,
    )
    judged = row_mask(frame, "judged")
    fams = families(frame)
    fitted = fit(frame, judged, config)
    give_back_memory()
    aside = functools.partial(_aside, frame, rs, judged, fams, config, fitted)
    with beside(aside, "the gap and rejection sections", _fork_aside(frame, config)) as side:
        out = _sections(frame, infos, config, costs, rules, rs, judged, fams, side)
    written: dict[str, Any] = json_value(out)  # the records as their types write them
    return written


ASIDE_MIN_ROWS = 100_000
"""Frames of at least this many rows have their gap and rejection sections computed in
a forked process while this one computes the others (``--jobs`` of 2 or more): a fork
costs tens of milliseconds, those sections about a third of the figures' time."""


def _fork_aside(frame: pd.DataFrame, config: AnalyzeConfig) -> bool:
    """Whether the aside sections get a process of their own."""
    jobs = default_jobs() if config.jobs is None else config.jobs
    return jobs >= 2 and len(frame) >= ASIDE_MIN_ROWS


def _aside(
    frame: pd.DataFrame,
    rs: Resampler,
    judged: Mask,
    fams: dict[str, Mask],
    config: AnalyzeConfig,
    fitted: dict[str, Any] | None,
) -> tuple[Gap | None, dict[str, Any] | None]:
    """The sections no other section reads, computed beside the others: ``gap`` (with
    its logistic model ``fitted``) and ``rejections`` (with ``details``)."""
    gap_figures = gap_section(frame, rs, judged, config, fitted)
    give_back_memory()
    return gap_figures, rejection_section(frame, rs, fams) if config.details else None


def _sections(
    frame: pd.DataFrame,
    infos: Sequence[RunInfo],
    config: AnalyzeConfig,
    costs: Mapping[str, tuple[float, str]] | None,
    rules: Rules,
    rs: Resampler,
    judged: Mask,
    fams: dict[str, Mask],
    side: Beside[tuple[Gap | None, dict[str, Any] | None]],
) -> dict[str, Any]:
    """summary.json's sections in its order; ``side`` gives those of :func:`_aside`."""
    parts = compute_parts(frame, rs, config.support, rules.control_range)
    standardised = {  # beside the judged gap, and read by the sensitivity
        name: replace(
            family,
            gap_length_standardised=typed(
                LengthStandardised,
                length_standardised(frame, rs, judged & fams[name], config.support),
            ),
        )
        for name, family in parts.families.items()
        if family.gap_judged is not None
    }
    parts = replace(parts, families=parts.families | standardised)
    give_back_memory()
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
    give_back_memory()
    out["text_per_step"] = text_per_step(frame, rs, scope)
    out["families"] = parts.families
    out["acceptance_per_k"] = acceptance_per_k(frame, rs, fams, config.min_count)
    parts = replace(parts, families=label_pooled(out, frame, fams, scope_name, parts.families))
    out["families"] = parts.families
    out["h2_contrast"] = parts.contrast
    out["gap"] = None  # from the side (the key keeps its place in the file)
    give_back_memory()
    out["hypotheses"] = refuse_unvouched(decide(frame, rs, rules, parts), infos)
    give_back_memory()
    if config.details:
        out["hypotheses"] = add_sensitivity(
            out["hypotheses"], frame, rs, rules, config.support, parts
        )
        give_back_memory()
        out["classes"] = class_gaps(frame, rs, fams, judged, config.support, config.min_count)
        give_back_memory()
        out["rejections"] = None  # from the side
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
            pooled = {name: family.gap_judged for name, family in parts.families.items()}
            # the file's name, not its path: summary.json travels (committed samples)
            source = f"tags.domain of {config.prompts.name}" if config.prompts else "tags.domain"
            out["domains"] = domain_section(
                frame, rs, fams, judged, pooled, rules, config.seed, source
            )
    out["runs"] = []
    for info in infos:
        give_back_memory()
        out["runs"].append(run_section(frame, rs, info, config, (costs or {}).get(info.method)))
    out["margin_in_speed"] = margin_section(out["runs"], rules.delta, config.method_families)
    out["gap"], rejections = side.result()
    if config.details:
        # rejection_summary builds a block; typed here, where it enters the summary
        out["rejections"] = typed(Rejections, rejections)
    return out


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
    out: dict[str, Any],
    frame: pd.DataFrame,
    fams: Mapping[str, Any],
    scope: str,
    families: Mapping[str, Family],
) -> dict[str, Family]:
    """``families`` with every rate and gap of a family that pools runs of several k
    labelled ``pooled_over_k`` and ``family``; in ``out``, the same labels on the
    ``scope`` family's top-level acceptance and text per step (in place). Per-k figures
    are in ``acceptance_per_k`` and ``runs[]``."""
    ks_all = frame["k"].to_numpy() if "k" in frame else np.zeros(len(frame), dtype=np.int64)

    def mark(figure: Any, ks: list[int], family: str) -> None:
        if isinstance(figure, dict) and figure:
            figure.update(pooled_over_k=ks, family=family)

    labelled = dict(families)
    for name, mask in fams.items():
        ks = [int(x) for x in np.unique(ks_all[mask])]
        if len(ks) < 2:
            continue
        if name in labelled:
            labelled[name] = _labelled(labelled[name], tuple(ks))
        if name != scope:
            continue
        for key in ("acceptance", "acceptance_judged"):
            for figure in (out.get(key) or {}).values():
                mark(figure, ks, name)
        for per_lang_block in (out.get("text_per_step") or {}).values():
            for figure in per_lang_block.values():
                mark(figure, ks, name)
    return labelled


def _labelled(family: Family, ks: tuple[int, ...]) -> Family:
    """``family`` with its rates and gaps labelled as pooled over ``ks``."""
    name = family.name

    def gap(figure: E | None) -> E | None:
        return replace(figure, pooled_over_k=ks, family=name) if figure is not None else None

    def rates(block: dict[str, Rate]) -> dict[str, Rate]:
        return {lang: replace(r, pooled_over_k=ks, family=name) for lang, r in block.items()}

    return replace(
        family,
        acceptance=rates(family.acceptance),
        acceptance_judged=rates(family.acceptance_judged),
        gap_judged=gap(family.gap_judged),
        gap_all=gap(family.gap_all),
        gap_length_standardised=gap(family.gap_length_standardised),
    )


def refuse_unvouched(
    hypotheses: dict[str, Hypothesis], infos: Sequence[RunInfo]
) -> dict[str, Hypothesis]:
    """No verdict from approximate replays that no check trace vouches for
    (:mod:`tokenlens.replay.trust`): each hypothesis becomes inconclusive, says why, and
    keeps its figures."""
    reasons = [f"{info.label}: {info.unvouched}" for info in infos if info.unvouched]
    if not reasons:
        return hypotheses
    return {
        name: replace(
            h,
            verdict=INCONCLUSIVE,
            refused=tuple(reasons),
            evidence=(
                f"No verdict: {len(reasons)} analysed run(s) are approximate replays that "
                f"no check trace vouches for ({reasons[0]}). {h.evidence or ''}"
            ).strip(),
        )
        for name, h in hypotheses.items()
    }


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
