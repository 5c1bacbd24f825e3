"""Speed model: tokens per verification step and speedup per k, from measured acceptance.

The i.i.d. formula (Leviathan et al. 2023) assumes every draft position is accepted
with the same probability a: tokens/step = (1 - a^(k+1)) / (1 - a). Under that model
the maximum-likelihood a is the *judged* rate (accepted / (accepted + first
rejections)): vLLM's overall rate is (a + ... + a^k)/k, a different number, so plugging
it in would understate tokens/step. Real drafters decay along the draft, so we predict
from the *measured* unconditional per-position acceptance a_j (position j accepted,
hence 0..j-1 too; accepted at j / number of drafts, as vLLM counts it):

    tokens/step(k) = 1 + sum_{j<k} a_j

which is exact for k up to the traced k when the drafter's first k proposals do not
depend on k (n-gram, greedy draft models). Beyond the traced k we extrapolate with the
last measured conditional rate rho = a_(K-1) / a_(K-2): a_j = a_(K-1) rho^(j-K+1)
(flagged ``extrapolated``). Wall time per step is (1 + k c) target forward passes,
with c = draft cost / target cost, so speedup(k) = tokens/step(k) / (1 + k c) and
tok/s = baseline tok/s * speedup. c comes from ``--draft-cost``, a fit to bench
measurements (:func:`fit_draft_cost`), or a per-method default. A default is an
assumption, not a measurement: with it the model still gives tokens/step and speedup
per k, but no recommended k (with c = 0, n-gram's recommendation would always be the
largest k, which says nothing about the hardware).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokenlens.analysis.summary_sections import SpeedMargin
from tokenlens.bench_results import RESULTS_CSV, read_results
from tokenlens.engine.methods import TRAINED
from tokenlens.errors import TokenlensError

DEFAULT_COST_TRAINING_FREE = 0.0
DEFAULT_COST_TRAINED = 0.1
MAX_K = 16


@dataclass(frozen=True)
class BenchPoint:
    """One measured case: k, tokens per step (mean acceptance length), tok/s, baseline tok/s."""

    k: int
    tokens_per_step: float
    tok_per_s: float
    baseline_tok_per_s: float
    method: str = ""


def fit_draft_cost(points: Sequence[BenchPoint]) -> float:
    """Least-squares c in  step_time / baseline_step_time = 1 + c k  (through the origin).

    step_time = tokens_per_step / tok_per_s; a baseline step emits one token, so its
    time is 1 / baseline_tok_per_s.
    """
    xs, ys = [], []
    for p in points:
        if p.k < 1 or p.tok_per_s <= 0 or p.baseline_tok_per_s <= 0:
            continue
        xs.append(float(p.k))
        ys.append(p.tokens_per_step / p.tok_per_s * p.baseline_tok_per_s - 1.0)
    if not xs:
        raise TokenlensError("no bench case with k >= 1 and positive tok/s to fit the draft cost")
    return max(0.0, sum(x * y for x, y in zip(xs, ys, strict=True)) / sum(x * x for x in xs))


def read_bench_points(path: Path) -> list[BenchPoint]:
    """Speculative cases of a ``tokenlens bench`` output (its directory or results.csv).

    tokens/step is the case's mean acceptance length, baseline tok/s is recovered from
    its speedup over the matching baseline; baseline rows and cases without a matching
    baseline are skipped.
    """
    rows = read_results(path / RESULTS_CSV if path.is_dir() else path)
    points = []
    for row in rows:
        mal, tok_s, speedup = row["mean_acceptance_length"], row["tok_s"], row["speedup_tok_s"]
        if row["method"] == "none" or mal is None or not tok_s or not speedup:
            continue
        points.append(BenchPoint(row["k"], mal, tok_s, tok_s / speedup, row["method"]))
    return points


def position_curve(accepted_per_position: Sequence[float], max_k: int) -> tuple[list[float], int]:
    """a_0..a_(max_k-1): measured where traced, extrapolated geometrically beyond."""
    a = [float(x) for x in accepted_per_position]
    measured = len(a)
    if not a:
        return [0.0] * max_k, 0
    rho = a[-1] / a[-2] if len(a) >= 2 and a[-2] > 0 else a[-1]
    while len(a) < max_k:
        a.append(a[-1] * rho)
    return a[:max_k], measured


def iid_tokens_per_step(rate: float, k: int) -> float:
    """Leviathan et al.: (1 - a^(k+1)) / (1 - a)."""
    if rate >= 1.0:
        return float(k + 1)
    return (1.0 - rate ** (k + 1)) / (1.0 - rate)


def default_cost(family: str) -> float:
    """The draft cost assumed for a drafter family without a measured one."""
    return DEFAULT_COST_TRAINED if family == TRAINED else DEFAULT_COST_TRAINING_FREE


def speed_model(
    per_position: Sequence[float],
    iid_rate: float,
    traced_k: int,
    cost: float,
    measured_tokens_per_step: float | None = None,
    baseline_tok_per_s: float | None = None,
    cost_measured: bool = True,
) -> dict[str, Any]:
    """Predictions for k = 1..max(2 traced_k, 8); the best k only when c was measured.

    ``iid_rate`` is the judged acceptance rate (the i.i.d. model's MLE).
    """
    max_k = min(MAX_K, max(2 * traced_k, 8))
    curve, measured = position_curve(per_position, max_k)
    rows: list[dict[str, Any]] = []
    for k in range(1, max_k + 1):
        tps = 1.0 + sum(curve[:k])
        speedup = tps / (1.0 + k * cost)
        rows.append(
            {
                "k": k,
                "tokens_per_step": tps,
                "tokens_per_step_iid": iid_tokens_per_step(iid_rate, k),
                "speedup": speedup,
                "tok_per_s": baseline_tok_per_s * speedup if baseline_tok_per_s else None,
                "extrapolated": k > measured,
            }
        )
    best = max(rows, key=lambda r: r["speedup"])
    at_traced = rows[traced_k - 1] if 1 <= traced_k <= len(rows) else None
    out: dict[str, Any] = {
        "draft_cost": cost,
        "draft_cost_measured": cost_measured,
        "traced_k": traced_k,
        "iid_rate": iid_rate,
        "measured_tokens_per_step": measured_tokens_per_step,
        "predicted_tokens_per_step": at_traced["tokens_per_step"] if at_traced else None,
        "iid_tokens_per_step": at_traced["tokens_per_step_iid"] if at_traced else None,
        "recommended_k": best["k"] if cost_measured else None,
        "recommended_speedup": best["speedup"] if cost_measured else None,
        "per_k": rows,
    }
    if not cost_measured:
        out["no_recommendation"] = (
            "the draft cost is an assumed default, not measured: pass --bench DIR or "
            "--draft-cost C to get a recommended k"
        )
    return out


def margin_in_speed(rate: float, k: int, delta: float) -> SpeedMargin:
    """The margin δ in speed terms: what acceptance ``delta`` lower than ``rate`` costs
    at ``k`` by the i.i.d. formula (Leviathan et al.), ``rate`` the judged rate (the
    model's MLE). Tokens per step at both rates, their difference, and the relative
    change of speed, tokens/step(rate − δ) / tokens/step(rate) − 1: at equal k the
    draft cost c divides both alike, so it is also the change of the modelled speedup
    whatever c is."""
    at = iid_tokens_per_step(rate, k)
    below = iid_tokens_per_step(max(rate - delta, 0.0), k)
    return SpeedMargin(
        k=k,
        acceptance=rate,
        delta=delta,
        tokens_per_step=at,
        tokens_per_step_at_minus_delta=below,
        difference=below - at,
        relative_speed=below / at - 1.0,
    )
