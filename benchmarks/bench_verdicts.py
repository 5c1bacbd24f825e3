"""Verdicts, coverage and bias of the analysis on simulated studies (not a test).

For each scenario of :mod:`tokenlens.testing.scenarios` (``ALL_SCENARIOS``: the
standard ones, the margin ones and the assumption breakers) and each study size N
(prompts per language), simulates ``--sims`` independent studies, runs the estimator
(``summarize`` + ``key_estimates``) on each with every interval method of
``--intervals``, and prints:

- the rate of each verdict for H1 and H2;
- the coverage of every estimand's 95% interval against its population value (the
  estimator's own point estimate on one simulated population of 20,000 pairs,
  cross-checked against the test bed's implementation of the definitions,
  :func:`tokenlens.testing.truth.estimands`), with the share of studies where it was
  not estimable;
- the bias of each part against the population value and against the mechanism's
  counterfactual value (:func:`tokenlens.testing.truth.mechanisms`);
- the acceptability rule of issue 12: at N = 30 a null gives ``supported`` for
  either hypothesis in at most 5% of simulations, and a planted 10 pp effect is found
  (``supported``) in at least 80%;
- ``supported`` rates under the shipped readings (90% decision interval) and under
  the first rule's (95% interval), on the same studies;
- the real size of each test at its margin (scenarios ``margin*``: the true effect is
  exactly −δ): the rule is acceptable when ``supported`` and ``no_japanese_deficit``
  each stay at or below 5% there;
- H2's power: the measured ``supported`` rate next to the power each study's summary
  predicted for a 10 pp effect from the whole conjunction rule.

Designs (``--design``): ``k3``, one n-gram and one draft-model run at k = 3 (the test
bed's default); ``committed``, both drafters at k = 1..5 replayed from one trace (every
run of a drafter shares one agreement sequence), as the committed full study has.

Run: ``PYTHONPATH=. python benchmarks/bench_verdicts.py [--sims 200] [--jobs 2]``
(``--quick`` for a smoke run). Truths are cached under ~/.cache/tokenlens/testbed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

from tokenlens.progress import TqdmProgress
from tokenlens.testing import estimator
from tokenlens.testing.scenarios import ALL_SCENARIOS as SCENARIOS
from tokenlens.testing.simulate import Study, committed_runs, simulate_study
from tokenlens.testing.truth import CACHE, ESTIMANDS, Design, estimands, rows_of, truth

DESIGNS = {"k3": Design(), "committed": Design(committed_runs(), replay=True)}

VERDICTS = (
    "supported",
    "not_supported",
    "no_japanese_deficit",
    "inconclusive",
    "insufficient_data",
)
SHORT = {
    "supported": "sup",
    "not_supported": "not",
    "no_japanese_deficit": "nojd",
    "inconclusive": "inc",
    "insufficient_data": "insuf",
}
# The mechanism each estimand is read as (None: no mechanism reading).
MECHANISM: dict[str, Callable[[dict[str, float]], float] | None] = {
    "acceptance_ja": None,
    "acceptance_en": None,
    "gap_trained": lambda m: m["h1_trained"] + m["lang_trained"],
    "gap_free": lambda m: m["h1_free"] + m["lang_free"],
    "composition_trained": lambda m: m["h1_trained"],
    "within_trained": lambda m: m["lang_trained"],
    "out_of_support_trained": lambda m: 0.0,
    "composition_free": lambda m: m["h1_free"],
    "within_free": lambda m: m["lang_free"],
    "out_of_support_free": lambda m: 0.0,
    "h2_did": lambda m: m["lang_trained"] - m["lang_free"],
}

Record = dict[str, Any]


# --- the estimator ------------------------------------------------------------------


def estimate(study: Study, n_boot: int, seed: int, interval: str) -> Record:
    """Key estimates and verdicts of one study under one interval method."""
    summary = estimator.analyze(study, n_boot, seed, interval)
    est = estimator.key_estimates(summary)
    power = summary["hypotheses"]["H2"].get("power") or {}
    return {
        "power_h2": (power.get("power_at") or {}).get("0.1"),
        "est": {
            name: [
                est[name]["value"],
                est[name]["ci_low"],
                est[name]["ci_high"],
                est[name]["not_estimable"],
                est[name]["decision_low"],
                est[name]["decision_high"],
            ]
            for name in est  # every key estimate (the H2 check too)
        },
        "H1": summary["hypotheses"]["H1"]["verdict"],
        "H2": summary["hypotheses"]["H2"]["verdict"],
    }


# --- simulation tasks -----------------------------------------------------------------


def study_seed(scenario: str, n: int, sim: int) -> int:
    return list(SCENARIOS).index(scenario) * 10_000_000 + n * 10_000 + sim


def _task(args: tuple[str, int, int, int, tuple[str, ...], str]) -> list[Record]:
    scenario, n, sim, n_boot, intervals, design = args
    plan = DESIGNS[design]
    study = simulate_study(
        SCENARIOS[scenario],
        n,
        seed=study_seed(scenario, n, sim),
        runs=plan.runs,
        replay=plan.replay,
    )
    out = []
    for interval in intervals:
        start = time.perf_counter()
        rec = estimate(study, n_boot, seed=sim, interval=interval)
        rec.update(
            scenario=scenario,
            n=n,
            sim=sim,
            interval=interval,
            seconds=time.perf_counter() - start,
        )
        out.append(rec)
    return out


POPULATION_SEED = 10**6
CROSSCHECK_PAIRS = 5000
"""The estimator's cross-check against the test bed's definitions runs on the
population's first chunk: the estimator on tens of thousands of pairs is too large a
frame for a 2-core machine."""


def _truth(args: tuple[str, int, str]) -> tuple[str, dict[str, dict[str, float | None]]]:
    """Population values (the test bed's own implementation of the definitions on
    ``pairs`` simulated pairs: the population the planted margins were solved on) and
    mechanism values; for the k3 design also the estimator's point estimates on the
    population's first chunk next to the definitions on that chunk (the cross-check).
    Cached by the code of both and the scenario."""
    name, pairs, design = args
    sc = SCENARIOS[name]
    tag = "" if design == "k3" else f"|{design}"
    key = hashlib.sha256(
        f"{_code_hash()}|{sc!r}|{pairs}|{POPULATION_SEED}{tag}".encode()
    ).hexdigest()[:16]
    path = CACHE / f"bench-{name}-{key}.json"
    if path.is_file():
        cached: dict[str, dict[str, float | None]] = json.loads(path.read_text("utf-8"))
        return name, cached
    t = truth(sc, pairs=pairs, design=DESIGNS[design])
    result: dict[str, dict[str, float | None]] = {
        "population": dict(t["population"]),
        "mechanism": dict(t["mechanism"]),
    }
    if design == "k3":
        # the population's first chunk (tokenlens.testing.truth._chunks seeds it so)
        study = simulate_study(sc, min(pairs, CROSSCHECK_PAIRS), seed=POPULATION_SEED * 1_000_003)
        summary = estimator.analyze(study, 10, seed=0)
        est = estimator.key_estimates(summary)
        values = {n: est[n]["value"] for n in ESTIMANDS}
        # the DiD as computed, also where the control check refuses to read it
        diff = (summary.get("h2_contrast") or {}).get("difference") or {}
        if diff.get("unchecked"):
            values["h2_did"] = diff["unchecked"].get("value")
        result["estimator_check"] = values
        result["independent_check"] = estimands(rows_of(study))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result), encoding="utf-8")
    return name, result


def _code_hash() -> str:
    """The analysis and the test bed as they are now (a changed estimator recomputes)."""
    import tokenlens.analysis
    import tokenlens.testing

    h = hashlib.sha256()
    for pkg in (tokenlens.analysis, tokenlens.testing):
        for f in sorted(Path(pkg.__path__[0]).glob("*.py")):
            h.update(f.read_bytes())
    return h.hexdigest()


# --- summaries ------------------------------------------------------------------------


def wilson(k: int, n: int) -> tuple[float, float]:
    """95% Wilson interval of a rate k/n."""
    if n == 0:
        return (float("nan"), float("nan"))
    z = 1.959964
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (centre - half, centre + half)


def verdict_table(records: Sequence[Record], interval: str) -> list[str]:
    lines = [
        f"### Verdict rates (%), interval = {interval}",
        "",
        "| scenario | N | "
        + " | ".join(f"{h} {SHORT[v]}" for h in ("H1", "H2") for v in VERDICTS)
        + " |",
        "|---|---:|" + "---:|" * (2 * len(VERDICTS)),
    ]
    for (scenario, n), recs in _groups(records, interval):
        cells = []
        for h in ("H1", "H2"):
            c = Counter(r[h] for r in recs)
            cells += [f"{100 * c[v] / len(recs):.0f}" for v in VERDICTS]
        lines.append(f"| {scenario} | {n} | " + " | ".join(cells) + " |")
    return lines


def _groups(records: Sequence[Record], interval: str) -> list[tuple[tuple[str, int], list[Record]]]:
    order = {name: i for i, name in enumerate(SCENARIOS)}
    groups: dict[tuple[str, int], list[Record]] = {}
    for r in records:
        if r["interval"] == interval:
            groups.setdefault((r["scenario"], r["n"]), []).append(r)
    return sorted(groups.items(), key=lambda kv: (order[kv[0][0]], kv[0][1]))


def coverage_table(records: Sequence[Record], truths: dict[str, Any], interval: str) -> list[str]:
    """Coverage % (not estimable %) of every estimand against its population value."""
    names = list(ESTIMANDS)
    lines = _head(
        f"### Coverage of the 95% intervals (%), interval = {interval}"
        " — in brackets: % of studies where the estimand was not estimable",
        names,
    )
    for (scenario, n), recs in _groups(records, interval):
        pop = truths[scenario]["population"]
        cells = []
        for name in names:
            cov, ne, _ = _coverage(recs, name, pop[name])
            cells.append(f"{cov}" + (f" ({ne:.0f})" if ne else ""))
        lines.append(f"| {scenario} | {n} | " + " | ".join(cells) + " |")
    return lines


def _head(title: str, names: Sequence[str]) -> list[str]:
    """A table title and the header of a scenario x N table with one column per estimand."""
    return [
        title,
        "",
        "| scenario | N | " + " | ".join(_short_name(n) for n in names) + " |",
        "|---|---:|" + "---:|" * len(names),
    ]


def _coverage(
    recs: Sequence[Record], name: str, truth_value: float | None
) -> tuple[str, float, int]:
    rows = [r["est"][name] for r in recs]
    ok = [x for x in rows if x[0] is not None and x[1] is not None and x[2] is not None]
    ne = 100 * (len(rows) - len(ok)) / len(rows) if rows else 0.0
    if truth_value is None or not ok:
        return "–", ne, 0
    hits = sum(e[1] <= truth_value <= e[2] for e in ok)
    return f"{100 * hits / len(ok):.1f}", ne, len(ok)


def bias_table(records: Sequence[Record], truths: dict[str, Any], interval: str) -> list[str]:
    """Mean estimate minus population value, and minus the mechanism value (pp)."""
    names = [n for n in ESTIMANDS if not n.startswith("acceptance")]
    lines = _head("### Bias (pp): mean estimate − population value / − mechanism value", names)
    for (scenario, n), recs in _groups(records, interval):
        pop = truths[scenario]["population"]
        mech = truths[scenario]["mechanism"]
        cells = []
        for name in names:
            values = [r["est"][name][0] for r in recs if r["est"][name][0] is not None]
            if not values or pop[name] is None:
                cells.append("–")
                continue
            mean = float(np.mean(values))
            fn = MECHANISM[name]
            m = f"{100 * (mean - fn(mech)):+.1f}" if fn is not None else "–"
            cells.append(f"{100 * (mean - pop[name]):+.1f} / {m}")
        lines.append(f"| {scenario} | {n} | " + " | ".join(cells) + " |")
    return lines


def crosscheck_lines(truths: dict[str, Any]) -> list[str]:
    """Estimator's point values vs the test bed's own implementation, on one population
    (``estimator_check``/``independent_check``; files of earlier runs: the whole
    population, ``population``/``independent``)."""
    lines = ["### Cross-check: estimator vs the test bed's implementation of the definitions", ""]
    for scenario, t in truths.items():
        est, ind = t.get("estimator_check"), t.get("independent_check")
        if est is None or ind is None:
            est, ind = t.get("population"), t.get("independent")
        if est is None or ind is None:
            lines.append(f"- {scenario}: no cross-check (committed design)")
            continue
        diffs = [
            abs(est[n] - ind[n]) for n in ESTIMANDS if est[n] is not None and ind[n] is not None
        ]
        missing = [n for n in ESTIMANDS if (est[n] is None) != (ind[n] is None)]
        lines.append(
            f"- {scenario}: largest difference {max(diffs, default=0.0):.2e}"
            + (f"; null in one only: {', '.join(missing)}" if missing else "")
        )
    return lines


def truth_table(truths: dict[str, Any], pairs: int) -> list[str]:
    names = list(ESTIMANDS)
    mech = ("h1_trained", "h1_free", "lang_trained", "lang_free")
    lines = [
        f"### Truth (pp): population values (the definitions on {pairs:,} pairs) and mechanism"
        " effects (counterfactuals with common random numbers)",
        "",
        "| scenario | "
        + " | ".join(_short_name(n) for n in names)
        + " | "
        + " | ".join(mech)
        + " |",
        "|---|" + "---:|" * (len(names) + len(mech)),
    ]
    for scenario in SCENARIOS:
        if scenario not in truths:
            continue
        pop = truths[scenario]["population"]
        m = truths[scenario]["mechanism"]
        cells = [f"{100 * pop[n]:.1f}" if pop[n] is not None else "n/e" for n in names]
        cells += [f"{100 * m[x]:+.1f}" for x in mech]
        lines.append(f"| {scenario} | " + " | ".join(cells) + " |")
    return lines


def rule_lines(records: Sequence[Record], interval: str, n: int = 30) -> list[str]:
    """The acceptability rule at N = ``n``, with Wilson intervals of the measured rates."""
    lines = [f"### Acceptability rule at N = {n}, interval = {interval}", ""]
    checks = [
        ("null", "H1", "<=", 0.05),
        ("null", "H2", "<=", 0.05),
        ("h1", "H1", ">=", 0.80),
        ("h2", "H2", ">=", 0.80),
        ("h1_h2", "H1", ">=", 0.80),
        ("h1_h2", "H2", ">=", 0.80),
    ]
    for scenario, h, op, bound in checks:
        recs = [
            r
            for r in records
            if r["interval"] == interval and r["scenario"] == scenario and r["n"] == n
        ]
        if not recs:
            continue
        k = sum(r[h] == "supported" for r in recs)
        rate = k / len(recs)
        lo, hi = wilson(k, len(recs))
        ok = rate <= bound if op == "<=" else rate >= bound
        lines.append(
            f"- {scenario}: {h} supported in {k}/{len(recs)} = {100 * rate:.1f}% "
            f"(95% CI {100 * lo:.1f}–{100 * hi:.1f}); rule {op} {100 * bound:.0f}%: "
            f"{'PASS' if ok else 'FAIL'}"
        )
    return lines


MARGIN_RULE = 0.05


def margin_lines(records: Sequence[Record], interval: str) -> list[str]:
    """The real size of each test at its margin: how often each verdict comes out when
    the true effect is exactly −δ (scenarios ``margin*``), with Wilson intervals; the
    rule: ``supported`` and ``no_japanese_deficit`` each at or below 5%."""
    lines = [
        f"### Size at the margin (true effect exactly −δ), interval = {interval}",
        "",
        "Acceptable when `supported` and `no_japanese_deficit` each come out in at most 5% "
        "of studies (95% Wilson intervals in brackets).",
        "",
        "| scenario | N | studies | H1 supported | H2 supported | no Japanese deficit | rule |",
        "|---|---:|---:|---|---|---|---|",
    ]
    for (scenario, n), recs in _groups(records, interval):
        if not scenario.startswith("margin"):
            continue
        cells, ok = [], True
        for key, verdict in (("H1", "supported"), ("H2", "supported"), ("H1", NOJD)):
            k = sum(r[key] == verdict for r in recs)
            lo, hi = wilson(k, len(recs))
            cells.append(f"{100 * k / len(recs):.1f}% [{100 * lo:.1f}, {100 * hi:.1f}]")
            ok &= k / len(recs) <= MARGIN_RULE
        lines.append(
            f"| {scenario} | {n} | {len(recs)} | " + " | ".join(cells) + f" | "
            f"{'PASS' if ok else 'FAIL'} |"
        )
    return lines


NOJD = "no_japanese_deficit"


def power_lines(records: Sequence[Record], interval: str) -> list[str]:
    """H2's power from the whole conjunction rule: the measured ``supported`` rate next to
    the mean of each study's own predicted power at 10 pp (its summary's
    ``power.power_at``), for the scenarios with H2 planted."""
    lines = [
        f"### H2 power: measured vs predicted by each summary (conjunction), interval = {interval}",
        "",
        "| scenario | N | studies | H2 supported (measured) | predicted power at 10 pp "
        "(mean of the summaries) |",
        "|---|---:|---:|---|---:|",
    ]
    for (scenario, n), recs in _groups(records, interval):
        if not SCENARIOS[scenario].h2:
            continue
        k = sum(r["H2"] == "supported" for r in recs)
        lo, hi = wilson(k, len(recs))
        predicted = [float(r["power_h2"]) for r in recs if r.get("power_h2") is not None]
        mean = f"{100 * float(np.mean(predicted)):.1f}%" if predicted else "–"
        lines.append(
            f"| {scenario} | {n} | {len(recs)} | {100 * k / len(recs):.1f}% "
            f"[{100 * lo:.1f}, {100 * hi:.1f}] | {mean} |"
        )
    return lines


def _as_estimates(rec: Record) -> dict[str, dict[str, Any]]:
    """A record's [value, lo, hi, why, decision_lo, decision_hi] lists as key estimates.
    Records written before the H2 check was recorded read the trained family's within
    part in its place (same bins at N >= 30, different weights)."""
    out = {
        name: dict(zip(("value", "ci_low", "ci_high", "not_estimable"), e[:4], strict=True))
        | ({"decision_low": e[4], "decision_high": e[5]} if len(e) > 5 else {})
        for name, e in rec["est"].items()
    }
    out.setdefault("h2_within_trained", out["within_trained"])
    return out


def decision_levels(records: Sequence[Record], interval: str) -> list[str]:
    """``supported`` rates under the shipped rule (readings on the 90% decision interval,
    one-sided 5%) vs the first rule (readings on the 95% interval, one-sided 2.5%), on
    the same studies, recomputed from the key estimates by the estimator's own rules
    (:func:`tokenlens.testing.estimator.supported`)."""
    lines = [
        f"### `supported` (%): readings on the 90% decision interval (shipped) vs the 95% "
        f"interval (first rule) (interval = {interval})",
        "",
        "| scenario | N | H1 90% | H1 95% | H2 90% | H2 95% |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for (scenario, n), recs in _groups(records, interval):
        cells = []
        for decision in (True, False):
            h1 = h2 = 0
            for r in recs:
                if "insufficient_data" in (r["H1"], r["H2"]):
                    continue
                said = estimator.supported(_as_estimates(r), decision)
                h1 += said["H1"]
                h2 += said["H2"]
            cells.append((h1, h2))
        (h1_90, h2_90), (h1_95, h2_95) = cells
        pct = [100 * x / len(recs) for x in (h1_90, h1_95, h2_90, h2_95)]
        lines.append(f"| {scenario} | {n} | " + " | ".join(f"{x:.0f}" for x in pct) + " |")
    return lines


def interval_summary(
    records: Sequence[Record], truths: dict[str, Any], intervals: Sequence[str]
) -> list[str]:
    """Mean |coverage − 95| per interval method over every scenario, N and estimand."""
    lines = ["### Interval methods compared (all scenarios, N and estimands)", ""]
    for interval in intervals:
        gaps, low = [], 0
        for (scenario, _), recs in _groups(records, interval):
            pop = truths[scenario]["population"]
            for name in ESTIMANDS:
                cov, _, n_ok = _coverage(recs, name, pop[name])
                if cov not in ("–",) and n_ok >= 20:
                    gaps.append(abs(float(cov) - 95.0))
                    low += float(cov) < 100 * stats.binom.ppf(0.0005, n_ok, 0.95) / n_ok
        if gaps:
            lines.append(
                f"- {interval}: mean |coverage − 95| = {np.mean(gaps):.1f} points over "
                f"{len(gaps)} cells; {low} cells below the 99.9% binomial band"
            )
    return lines


def _short_name(name: str) -> str:
    return (
        name.replace("composition", "comp")
        .replace("out_of_support", "oos")
        .replace("_trained", "_T")
        .replace("_free", "_F")
        .replace("acceptance", "acc")
    )


# --- main -----------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sims", type=int, default=200)
    parser.add_argument("--sizes", default="10,30,60")
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--intervals", default="t,percentile")
    parser.add_argument("--bootstrap", type=int, default=1000)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--truth-pairs", type=int, default=20_000)
    parser.add_argument("--json", type=Path, help="write every study's record here")
    parser.add_argument("--quick", action="store_true", help="10 sims, N = 30, B = 200")
    parser.add_argument("--from-json", type=Path, help="print the tables of a saved --json run")
    parser.add_argument(
        "--design",
        choices=sorted(DESIGNS),
        default="k3",
        help="k3: one run per drafter at k = 3; committed: both drafters at k = 1..5 "
        "replayed from one trace (the full study's design)",
    )
    args = parser.parse_args(argv)
    if args.from_json:
        saved = json.loads(args.from_json.read_text(encoding="utf-8"))
        print(report(saved["meta"], saved["truths"], saved["records"]))
        return
    if args.quick:
        args.sims, args.sizes, args.bootstrap = 10, "30", 200
    sizes = [int(x) for x in args.sizes.split(",")]
    scenarios = args.scenarios.split(",")
    unknown = sorted(set(scenarios) - set(SCENARIOS))
    if unknown:
        parser.error(f"unknown scenario {unknown[0]} (one of {', '.join(SCENARIOS)})")
    intervals = tuple(args.intervals.split(","))
    start = time.perf_counter()
    from tokenlens.testing.text import streams

    streams()  # load once before forking
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(args.jobs) as pool:
        truths = dict(pool.map(_truth, [(s, args.truth_pairs, args.design) for s in scenarios]))
        t_truth = time.perf_counter() - start
        tasks = [
            (s, n, i, args.bootstrap, intervals, args.design)
            for n in sizes
            for s in scenarios
            for i in range(args.sims)
        ]
        records: list[Record] = []
        progress = TqdmProgress()
        progress.stage("simulated studies", total=len(tasks), unit="study")
        for out in pool.imap_unordered(_task, tasks, chunksize=4):
            records.extend(out)
            progress.advance()
        progress.close()
    meta = {
        "sims": args.sims,
        "sizes": sizes,
        "bootstrap": args.bootstrap,
        "intervals": list(intervals),
        "jobs": args.jobs,
        "truth_pairs": args.truth_pairs,
        "design": args.design,
        "wall": time.perf_counter() - start,
        "truth_seconds": t_truth,
    }
    if args.json:
        data = {"meta": meta, "truths": truths, "records": records}
        args.json.write_text(json.dumps(data), encoding="utf-8")
    print(report(meta, truths, records))


def report(meta: dict[str, Any], truths: dict[str, Any], records: Sequence[Record]) -> str:
    """Every table, as Markdown."""
    intervals = meta["intervals"]
    per = np.mean([r["seconds"] for r in records])
    design = meta.get("design", "k3")
    head = (
        f"# bench_verdicts: {meta['sims']} studies per cell, N = {meta['sizes']}, "
        f"B = {meta['bootstrap']}, intervals {intervals}, design {design}, "
        f"{meta['jobs']} processes\n\n"
        f"wall time {meta['wall'] / 60:.1f} min (truths {meta['truth_seconds']:.0f} s; "
        f"estimator {per:.2f} s per study and interval method, on a shared 2-core machine)\n"
    )
    blocks = [truth_table(truths, meta["truth_pairs"]), crosscheck_lines(truths)]
    for interval in intervals:
        blocks += [
            *(rule_lines(records, interval, n) for n in meta["sizes"] if n >= 30),
            margin_lines(records, interval),
            power_lines(records, interval),
            verdict_table(records, interval),
            coverage_table(records, truths, interval),
        ]
    blocks += [
        bias_table(records, truths, intervals[0]),
        interval_summary(records, truths, intervals),
        decision_levels(records, intervals[0]),
    ]
    return head + "\n" + "\n\n".join("\n".join(b) for b in blocks)


if __name__ == "__main__":
    main()
