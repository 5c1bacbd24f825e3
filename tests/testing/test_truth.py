"""The ground truth: the estimand definitions by hand, and the planted effect sizes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tokenlens.testing.scenarios import SCENARIOS
from tokenlens.testing.simulate import simulate_study
from tokenlens.testing.truth import Rows, estimands, mechanisms, population, rows_of


def _rows(cells: list[tuple[int, int, float, int, int]]) -> Rows:
    """Rows from (family, lang, q, n rows, n accepted) cells; all-row counts = judged ones."""
    fam, lang, q, acc = [], [], [], []
    for f, g, p, n, a in cells:
        fam += [f] * n
        lang += [g] * n
        q += [p] * n
        acc += [True] * a + [False] * (n - a)
    counts = np.zeros((2, 2), dtype=np.int64)
    accepted = np.zeros((2, 2), dtype=np.int64)
    for f, g, _, n, a in cells:
        counts[f, g] += n
        accepted[f, g] += a
    return Rows(
        fam=np.asarray(fam, dtype=np.int8),
        lang=np.asarray(lang, dtype=np.int8),
        q=np.asarray(q, dtype=np.float64),
        accepted=np.asarray(acc, dtype=bool),
        all_rows=counts,
        all_accepted=accepted,
    )


# trained (0): JA 60 rows at q=0.3 (30 accepted), 40 at 0.8 (36); EN 20 at 0.3 (12), 80 at
# 0.8 (76). free (1): 50 + 50 rows per language, rates 0.2 and 0.4 in both languages.
HAND = [
    (0, 0, 0.3, 60, 30),
    (0, 0, 0.8, 40, 36),
    (0, 1, 0.3, 20, 12),
    (0, 1, 0.8, 80, 76),
    (1, 0, 0.3, 50, 10),
    (1, 0, 0.8, 50, 20),
    (1, 1, 0.3, 50, 10),
    (1, 1, 0.8, 50, 20),
]


def test_hand_worked_decomposition() -> None:
    est = estimands(_rows(HAND), min_count=1)
    # v_ja = (0.6, 0.4), v_en = (0.2, 0.8); r_ja = (0.5, 0.9), r_en = (0.6, 0.95)
    assert est["gap_trained"] == pytest.approx(0.66 - 0.88)
    assert est["composition_trained"] == pytest.approx(0.4 * 0.55 - 0.4 * 0.925)
    assert est["within_trained"] == pytest.approx(0.4 * -0.1 + 0.6 * -0.05)
    assert est["out_of_support_trained"] == pytest.approx(0.0, abs=1e-12)
    assert est["gap_free"] == pytest.approx(0.0) and est["within_free"] == pytest.approx(0.0)
    # DiD weights: mean of the four cells' shares = (0.45, 0.55)
    assert est["h2_did"] == pytest.approx(0.45 * -0.1 + 0.55 * -0.05)
    assert est["acceptance_ja"] == pytest.approx(0.66) and est["acceptance_en"] == 0.88


def test_thin_support_is_not_estimable() -> None:
    # EN has 20 < 30 rows at q=0.3: only the 0.8 bin is shared, and it holds 40% of JA's rows
    est = estimands(_rows(HAND), min_count=30)
    assert est["gap_trained"] is not None
    assert est["composition_trained"] is None and est["within_trained"] is None
    assert est["h2_did"] is None
    assert est["within_free"] == pytest.approx(0.0)


def test_rows_without_confidence_are_out_of_support() -> None:
    rows = _rows([*HAND, (0, 0, float("nan"), 10, 10)])
    est = estimands(rows, min_count=1)
    gap = 76 / 110 - 0.88
    assert est["gap_trained"] == pytest.approx(gap)
    parts = sum(est[f"{p}_trained"] or 0.0 for p in ("composition", "within", "out_of_support"))
    assert parts == pytest.approx(gap)
    assert est["out_of_support_trained"] == pytest.approx(gap - (0.66 - 0.88))


def test_matches_a_pandas_implementation() -> None:
    """The same estimands by pd.qcut and groupby on a simulated study's frame."""
    study = simulate_study(SCENARIOS["h1_h2"], 200, seed=3)
    est = estimands(rows_of(study))
    f = study.frame()
    f["family"] = np.where(f["method"] == "ngram", "free", "trained")
    j = f[f["judged"]].copy()
    j = j[j["output_index"] >= 0].copy()
    has_q = j["top1_prob"].notna()
    assert has_q.all()
    edges = np.unique(np.quantile(j["top1_prob"], np.linspace(0, 1, 21)))[1:-1]
    j["bin"] = np.digitize(j["top1_prob"], edges)
    for fam in ("trained", "free"):
        mine = j[j["family"] == fam]
        rate = mine.groupby("lang", observed=True)["accepted"].mean()
        assert est[f"gap_{fam}"] == pytest.approx(rate["ja"] - rate["en"])
        cells = mine[mine["bin"] >= 0].groupby(["lang", "bin"], observed=True)["accepted"]
        r = cells.mean().unstack("lang")
        v = cells.size().unstack("lang")
        v = v / v.sum()
        comp = ((v["ja"] - v["en"]) * (r["ja"] + r["en"]) / 2).sum()
        within = ((v["ja"] + v["en"]) / 2 * (r["ja"] - r["en"])).sum()
        assert est[f"composition_{fam}"] == pytest.approx(comp)
        assert est[f"within_{fam}"] == pytest.approx(within)
    acc = f[f["family"] == "trained"].groupby("lang", observed=True)["accepted"].mean()
    assert est["acceptance_ja"] == pytest.approx(acc["ja"])
    by = j[j["bin"] >= 0].groupby(["family", "lang", "bin"], observed=True)["accepted"]
    size = by.size()
    share = size / size.groupby(level=[0, 1], observed=True).transform("sum")
    w = share.groupby(level=2, observed=True).mean()
    rr = by.mean()
    did = (rr["trained", "ja"] - rr["trained", "en"]) - (rr["free", "ja"] - rr["free", "en"])
    assert est["h2_did"] == pytest.approx(float((w * did).sum()))


@pytest.mark.parametrize(
    ("name", "estimand"),
    [("h1", "composition_trained"), ("h2", "h2_did")],
)
def test_planted_effects_are_about_ten_points(name: str, estimand: str) -> None:
    value = population(SCENARIOS[name], pairs=3000, seed=7)[estimand]
    assert value is not None and -0.12 < value < -0.08


def test_null_population_is_null() -> None:
    est = population(SCENARIOS["null"], pairs=3000, seed=7)
    for name, value in est.items():
        if not name.startswith("acceptance"):
            assert value is not None and abs(value) < 0.015, name


def test_mechanisms_are_exact_counterfactuals() -> None:
    null = mechanisms(SCENARIOS["null"], pairs=300, seed=1)
    assert set(null.values()) == {0.0}
    h2 = mechanisms(SCENARIOS["h2"], pairs=600, seed=1)
    assert h2["h1_trained"] == h2["h1_free"] == h2["lang_free"] == 0.0
    assert h2["lang_trained"] < -0.05
    h1 = mechanisms(SCENARIOS["h1"], pairs=600, seed=1)
    assert h1["h1_trained"] < -0.05 and h1["h1_free"] < -0.05 and h1["lang_trained"] == 0.0


def test_truth_cache_key_reads_every_simulator_module(tmp_path: Path) -> None:
    """The cached truths' key hashes the code of every module the simulator runs (those
    truth.py imports from tokenlens.testing, and theirs): editing any of them changes
    the key, rewording a docstring does not (a renamed module once broke
    benchmarks/bench_verdicts.py while every test passed)."""
    import ast
    import importlib
    import importlib.util
    import shutil
    import sys

    truth_module = importlib.import_module("tokenlens.testing.truth")
    source = Path(str(truth_module.__file__)).parent
    copy = tmp_path / "testing"
    shutil.copytree(source, copy, ignore=shutil.ignore_patterns("__pycache__"))

    def simulator_modules() -> set[str]:
        seen, todo = set(), ["truth"]
        while todo:
            name = todo.pop()
            seen.add(name)
            tree = ast.parse((source / f"{name}.py").read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and node.module:
                    parent, _, child = node.module.rpartition(".")
                    if parent == "tokenlens.testing" and child not in seen:
                        todo.append(child)
        return seen

    def identity() -> str:
        spec = importlib.util.spec_from_file_location("truth_copy", copy / "truth.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["truth_copy"] = module  # dataclasses look their module up there
        try:
            spec.loader.exec_module(module)
        finally:
            del sys.modules["truth_copy"]
        key: str = module._code_identity()
        return key

    base = identity()
    assert base == truth_module._code_identity() and len(base) == 16
    modules = simulator_modules()
    assert {"truth", "simulate", "scenarios", "step_process", "text"} <= modules
    for name in sorted(modules):
        path = copy / f"{name}.py"
        original = path.read_text(encoding="utf-8")
        path.write_text(original + "\n_EDITED = 1\n", encoding="utf-8")
        assert identity() != base, f"editing {name}.py leaves the truths' cache key as it was"
        path.write_text(original.replace('"""', '"""Reworded. ', 1), encoding="utf-8")
        assert identity() == base, f"a docstring of {name}.py changes the key"
        path.write_text(original, encoding="utf-8")
