"""tokenlens lives in its users' vLLM environments: ranges, not pins, and no vLLM cap."""

from __future__ import annotations

import tomllib

from packaging.requirements import Requirement

from tests.support import REPO

PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def _requirements(items: list[str]) -> dict[str, Requirement]:
    reqs = [Requirement(item) for item in items]
    return {r.name.lower(): r for r in reqs}


def test_core_dependencies_are_ranges_that_admit_the_newest_stack() -> None:
    core = _requirements(PROJECT["dependencies"])
    assert not [r for r in core.values() if any(s.operator == "==" for s in r.specifier)]
    for name, version in (("numpy", "2.5.0"), ("pandas", "3.0.0"), ("pyarrow", "24.0.0")):
        assert core[name].specifier.contains(version), (name, version, core[name])


def test_the_gpu_extra_keeps_any_later_vllm() -> None:
    (vllm,) = [
        r for r in map(Requirement, PROJECT["optional-dependencies"]["gpu"]) if r.name == "vllm"
    ]
    for version in ("0.34.0", "0.35.0", "1.2.3"):
        assert vllm.specifier.contains(version), vllm


def test_script_class_tables_hold_minus_one_not_a_wrapped_uint8() -> None:
    """numpy 2.5 refuses ``np.where(mask, uint8_array, -1)`` (OverflowError at import);
    2.3/2.4 wrap the -1 to 255, which made the 'no weak class here' marker 255."""
    import numpy as np

    from tokenlens.text import classify

    weak = classify._WEAK
    assert classify._WEAK_HI.dtype == np.int16
    assert set(classify._WEAK_HI[~weak].tolist()) == {-1}
    assert set(classify._WEAK_LO[~weak].tolist()) == {255}
