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
