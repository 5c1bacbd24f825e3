"""Calibration figures of the test bed, computed alike from real and simulated runs.

:func:`observed` reads run directories (real or simulated) straight from parquet,
:func:`study_observed` a simulated study; :func:`figures` turns either pair of frames
into flat ``{"method/lang/figure": value}``. Run
``python -m tokenlens.testing.calibration RUN... [--sims 200] [--pairs 10]`` to print
the real figures beside the mean of simulated studies of the ``measured`` scenario.
The figures, the calibrated study and what the test bed does not reproduce:
docs/analysis.md, "Calibration of the test bed".
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

CONF_BINS = (0.0, 0.2, 0.4, 0.6, 0.8, 0.9, 0.95, 0.99, 1.0000001)
QUANTILES = (0.1, 0.25, 0.5, 0.75, 0.9)


def observed(paths: Sequence[Path]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(events frame, requests frame) of run directories, read straight from parquet.

    The events frame has ``method``, ``lang``, ``request_id``, ``step``,
    ``position``, ``accepted``, ``judged``, ``top1_prob``; the requests frame
    ``method``, ``lang``, ``request_id``, ``length`` and ``q`` (top-1 probability of
    every output token, an array).
    """
    frames, reqs = [], []
    for path in paths:
        manifest = json.loads((path / "manifest.json").read_text(encoding="utf-8"))
        method = str(manifest["speculative"]["method"])
        req = pq.read_table(path / "requests.parquet").to_pandas()
        ev = pq.read_table(path / "events.parquet").to_pandas()
        top1 = {
            rid: np.asarray([np.exp(max(lps)) for lps in tl], dtype=np.float64)
            for rid, tl in zip(req["request_id"], req["top_logprobs"], strict=True)
        }
        lang = dict(zip(req["request_id"], req["lang"], strict=True))
        out_idx = ev["output_index"].fillna(-1).astype(np.int64).to_numpy()
        q = np.asarray(
            [
                top1[r][i] if i >= 0 else np.nan
                for r, i in zip(ev["request_id"], out_idx, strict=True)
            ],
            dtype=np.float64,
        )
        frames.append(
            pd.DataFrame(
                {
                    "method": method,
                    "lang": ev["request_id"].map(lang).to_numpy(),
                    "request_id": ev["request_id"].to_numpy(),
                    "step": ev["step"].to_numpy(),
                    "position": ev["position"].to_numpy(),
                    "accepted": ev["accepted"].to_numpy(dtype=bool),
                    "judged": ev["emitted_token_id"].notna().to_numpy(),
                    "top1_prob": q,
                }
            )
        )
        reqs.append(
            pd.DataFrame(
                {
                    "method": method,
                    "lang": req["lang"].to_numpy(),
                    "request_id": req["request_id"].to_numpy(),
                    "length": req["output_token_ids"].map(len).to_numpy(),
                    "q": [top1[r] for r in req["request_id"]],
                }
            )
        )
    return pd.concat(frames, ignore_index=True), pd.concat(reqs, ignore_index=True)


def study_observed(study: Any) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The same two frames for a :class:`~tokenlens.testing.simulate.Study`."""
    frame = study.frame()
    frame = frame.assign(request_id=frame["request_id"].astype(str), lang=frame["lang"].astype(str))
    reqs = [
        pd.DataFrame(
            {
                "method": run.spec.method,
                "lang": study.langs,
                "request_id": study.prompt_ids,
                "length": study.length,
                "q": [study.q[i, : study.length[i]] for i in range(len(study.length))],
            }
        )
        for run in study.runs
    ]
    cols = ["method", "lang", "request_id", "step", "position", "accepted", "judged", "top1_prob"]
    return frame[cols], pd.concat(reqs, ignore_index=True)


def figures(frame: pd.DataFrame, requests: pd.DataFrame) -> dict[str, float]:
    """Flat ``{"method/lang/figure": value}`` of every calibration figure."""
    out: dict[str, float] = {}
    residuals: dict[str, dict[str, pd.Series]] = {}
    for (method, lang), ev in frame.groupby(["method", "lang"], observed=True, sort=True):
        key = f"{method}/{lang}"
        req = requests[(requests["method"] == method) & (requests["lang"] == lang)]
        judged = ev[ev["judged"]]
        out[f"{key}/acceptance"] = float(ev["accepted"].mean())
        out[f"{key}/judged_acceptance"] = float(judged["accepted"].mean())
        drafts = int((ev["position"] == 0).sum())
        for p in sorted(ev["position"].unique()):
            out[f"{key}/a{p}"] = float(ev.loc[ev["position"] == p, "accepted"].sum() / drafts)
        per = judged.groupby("request_id")["accepted"].agg(["mean", "size"])
        out[f"{key}/prompt_sd"] = float(per["mean"].std())
        out[f"{key}/judged_per_request"] = float(per["size"].mean())
        out[f"{key}/judged_per_request_sd"] = float(per["size"].std())
        steps = ev.groupby("request_id")["step"].nunique()
        emitted = judged.groupby("request_id").size() + _bonus(ev)
        length = req.set_index("request_id")["length"]
        plain = (length.loc[steps.index] - 1 - emitted.reindex(steps.index, fill_value=0)).clip(0)
        out[f"{key}/offer_rate"] = float(steps.sum() / (steps.sum() + plain.sum()))
        q = judged["top1_prob"].to_numpy()
        ok = np.isfinite(q)
        bins = np.digitize(q[ok], CONF_BINS[1:-1])
        acc = judged["accepted"].to_numpy()[ok]
        res = _residuals(judged["request_id"].astype(str).to_numpy()[ok], bins, acc)
        residuals.setdefault(str(method), {})[str(lang)] = res
        out[f"{key}/resid_sd"] = float(res.std())
        for b in range(len(CONF_BINS) - 1):
            sel = bins == b
            label = f"{CONF_BINS[b]:g}-{min(CONF_BINS[b + 1], 1.0):g}"
            out[f"{key}/curve/{label}"] = float(acc[sel].mean()) if sel.any() else float("nan")
            out[f"{key}/curve_n/{label}"] = float(sel.sum())
        all_q = np.concatenate(list(req["q"])) if len(req) else np.zeros(0)
        for level in QUANTILES:
            out[f"{key}/q{int(level * 100)}"] = float(np.quantile(all_q, level))
        out[f"{key}/length"] = float(length.mean())
        out[f"{key}/q_lag1"] = _lag1(list(req["q"]))
    for method, by_lang in residuals.items():
        corr = _pair_corr(by_lang)
        for lang in by_lang:
            out[f"{method}/{lang}/pair_corr"] = corr
    return out


def _residuals(request: np.ndarray, bins: np.ndarray, acc: np.ndarray) -> pd.Series:
    """Per request: judged acceptance at equal target confidence.

    Each judged row's acceptance minus the acceptance of its confidence bin (same
    method and language), averaged per request.
    """
    frame = pd.DataFrame({"request": request, "bin": bins, "acc": acc.astype(np.float64)})
    frame["res"] = frame["acc"] - frame.groupby("bin")["acc"].transform("mean")
    return frame.groupby("request")["res"].mean()


def _pair_corr(residuals: Mapping[str, pd.Series]) -> float:
    """Correlation of the equal-confidence residuals of a JA/EN translation pair's prompts.

    Prompt ids end in ``-ja`` / ``-en`` (the shipped corpora and the test bed alike);
    the pair is the rest.
    """
    if "ja" not in residuals or "en" not in residuals:
        return float("nan")
    ja, en = (
        residuals[lang].set_axis(residuals[lang].index.str.replace(f"-{lang}$", "", regex=True))
        for lang in ("ja", "en")
    )
    both = pd.concat([ja, en], axis=1, join="inner")
    return float(both.iloc[:, 0].corr(both.iloc[:, 1])) if len(both) > 2 else float("nan")


def _bonus(ev: pd.DataFrame) -> pd.Series:
    """Bonus tokens per request: steps whose drafts were all accepted."""
    per_step = ev.groupby(["request_id", "step"])["accepted"].agg(["sum", "size"])
    full = (per_step["sum"] == per_step["size"]).groupby(level=0).sum()
    return full


def _lag1(series: list[np.ndarray]) -> float:
    """Lag-1 autocorrelation of logit(q) inside requests (each centred on its own mean)."""
    a, b = [], []
    for q in series:
        y = np.log(np.clip(q, 1e-4, 1 - 1e-4) / (1 - np.clip(q, 1e-4, 1 - 1e-4)))
        y = y - y.mean()
        a.append(y[1:])
        b.append(y[:-1])
    x, z = np.concatenate(a), np.concatenate(b)
    return float(np.corrcoef(x, z)[0, 1]) if len(x) > 2 else float("nan")


def mean_figures(runs: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """Average of figures over simulated studies (NaN-aware)."""
    out = {}
    for key in sorted(set().union(*runs)):
        values = np.asarray([r.get(key, np.nan) for r in runs], dtype=np.float64)
        values = values[np.isfinite(values)]
        out[key] = float(values.mean()) if len(values) else float("nan")
    return out


def _finite_sd(values: list[float]) -> float:
    a = np.asarray(values, dtype=np.float64)
    a = a[np.isfinite(a)]
    return float(a.std()) if len(a) > 1 else float("nan")


def main(argv: Sequence[str] | None = None) -> None:
    from tokenlens.testing.scenarios import SCENARIOS
    from tokenlens.testing.simulate import simulate_study

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--sims", type=int, default=200)
    parser.add_argument("--scenario", default="measured")
    parser.add_argument("--pairs", type=int, default=10)
    parser.add_argument("--json", type=Path, help="also write the real figures here")
    args = parser.parse_args(argv)
    real = figures(*observed(args.runs))
    sims = []
    for seed in range(args.sims):
        study = simulate_study(SCENARIOS[args.scenario], args.pairs, seed)
        sims.append(figures(*study_observed(study)))
    sim = mean_figures(sims)
    spread = {k: _finite_sd([r.get(k, np.nan) for r in sims]) for k in sim}
    if args.json:
        args.json.write_text(json.dumps(real, indent=1), encoding="utf-8")
    for key in sorted(real):
        if "/curve_n/" in key:
            continue
        m, sd = sim.get(key, float("nan")), spread.get(key, float("nan"))
        z = (real[key] - m) / sd if sd > 0 else float("nan")
        print(f"{key:40s} real {real[key]:8.3f}   sim {m:8.3f} (sd {sd:6.3f}, z {z:+5.1f})")


if __name__ == "__main__":
    main()
