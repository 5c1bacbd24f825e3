"""The estimator under test, called on simulated studies (the one place that knows its API).

The test bed itself never imports the analysis; the tests and
``benchmarks/bench_verdicts.py`` reach it through these helpers, which build the
``RunInfo`` of each simulated run (its vLLM counters come from its events) and the
``AnalyzeConfig`` with the options the estimator has.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from tokenlens.testing.simulate import Study
from tokenlens.testing.truth import ESTIMANDS


def run_infos(study: Study) -> list[Any]:
    """``RunInfo`` of every run of ``study``."""
    from tokenlens.analysis.summarize import RunInfo

    return [
        RunInfo(
            label=r.spec.label,
            path="",
            method=r.spec.method,
            k=r.spec.k,
            signature="",
            status="complete",
            metrics=r.counters(),
        )
        for r in study.runs
    ]


def config(n_boot: int, seed: int, interval: str = "t", min_prompts: int = 30) -> Any:
    """``AnalyzeConfig`` for an in-memory analysis (no run directories, no output)."""
    from tokenlens.analysis.config import AnalyzeConfig

    wanted: dict[str, Any] = {
        "runs": (),
        "out": Path("."),
        "n_boot": n_boot,
        "seed": seed,
        "interval": interval,
        "min_prompts": min_prompts,
        "regression": False,
        # what no verdict reads (per-k verdicts, class differences, domains, rejections)
        "details": False,
    }
    names = {f.name for f in dataclasses.fields(AnalyzeConfig)}
    return AnalyzeConfig(**{k: v for k, v in wanted.items() if k in names})


def analyze(
    study: Study,
    n_boot: int,
    seed: int,
    interval: str = "t",
    min_prompts: int = 30,
    frame: Any = None,
) -> dict[str, Any]:
    """``summarize`` on the study's frame (or on ``frame``, e.g. a modified copy)."""
    from tokenlens.analysis.summarize import summarize

    data = study.frame() if frame is None else frame
    summary: dict[str, Any] = summarize(
        data, run_infos(study), config(n_boot, seed, interval, min_prompts)
    )
    return summary


def key_estimates(summary: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The estimator's ``key_estimates``: value, ci_low, ci_high, not_estimable per name."""
    from tokenlens.analysis.estimands import key_estimates as real

    result: dict[str, dict[str, Any]] = real(summary)
    missing = set(ESTIMANDS) - set(result)
    if missing:
        raise KeyError(f"key_estimates lacks {sorted(missing)}")
    return result


def supported(est: dict[str, Any], decision: bool = True) -> dict[str, bool]:
    """Whether H1 and H2 read ``supported`` from key estimates (``key_estimates`` form),
    by the analysis' own :func:`~tokenlens.analysis.rules.verdict_of` (the no-deficit
    gate, then the veto rule for H1 and the conjunction for H2, H2's effect bounded from
    its check where the control was refused), read on each figure's decision interval
    or, with ``decision`` False, on its reported 95% interval (the first rule). The
    minimum-prompts gate is the caller's."""
    from tokenlens.analysis.rules import (
        DECISION_KEYS,
        REPORTED_KEYS,
        SUPPORTED,
        Rules,
        verdict_of,
    )

    rules, keys = Rules(), DECISION_KEYS if decision else REPORTED_KEYS
    gate = est["gap_trained"]
    h1 = verdict_of(
        gate, est["composition_trained"], est["composition_free"], rules.delta, False, keys
    )
    did = "h2_did_read" if "h2_did_read" in est else "h2_did"  # null outside the control's range
    why = str(est[did].get("not_estimable") or "") if did == "h2_did_read" else ""
    refused = est[did].get("value") is None and why.startswith("the control's assumption")
    h2 = verdict_of(
        gate,
        est[did],
        est["h2_within_trained"],
        rules.delta,
        True,
        keys,
        rules.control_range if refused else None,
    )
    return {"H1": h1 == SUPPORTED, "H2": h2 == SUPPORTED}
