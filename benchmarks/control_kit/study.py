"""study.json: per drafter its share, training record, run facts, acceptance, gaps and
verdicts (read from its ``tokenlens analyze`` summary.json), and the control's checks.

summary.json fields are read defensively: a field the installed analysis does not
write (the length-standardised gap is being added) is null with the reason, never 0.
"""

from __future__ import annotations

import json
from itertools import pairwise
from pathlib import Path
from typing import Any

from .contrasts import contrasts, read_counts

INTERVAL = ("value", "ci_low", "ci_high", "decision_low", "decision_high", "n")
VERDICT = (
    "verdict",
    "reading",
    "effect",
    "ci_low",
    "ci_high",
    "decision_low",
    "decision_high",
    "statement",
)


def _get(d: Any, *keys: str) -> Any:
    for k in keys:
        if not isinstance(d, dict) or k not in d:
            return None
        d = d[k]
    return d


def _pick(d: Any, keys: tuple[str, ...]) -> dict[str, Any] | None:
    if not isinstance(d, dict):
        return None
    return {k: d.get(k) for k in keys if k in d}


def _missing(what: str) -> dict[str, Any]:
    return {"value": None, "reason": f"not in this analysis' summary.json ({what})"}


def length_standardised(summary: dict[str, Any]) -> dict[str, Any]:
    """The length-standardised judged gap, wherever the analysis put it (a key under
    ``gap`` or the trained family naming both length and standardisation), or null."""
    for where in (("gap",), ("families", "trained")):
        block = _get(summary, *where)
        if not isinstance(block, dict):
            continue
        for key, value in block.items():
            k = key.lower()
            if "length" in k and "standard" in k and isinstance(value, dict):
                found = _pick(value, INTERVAL) or {}
                return {**found, "source": ".".join((*where, key))}
    return _missing("no key under gap or families.trained names a length-standardised gap")


def _rate(block: Any) -> dict[str, Any] | None:
    return _pick(block, ("rate", "ci_low", "ci_high", "n", "accepted", "requests"))


def drafter_entry(
    name: str,
    record: dict[str, Any] | None,
    summary: dict[str, Any] | None,
    manifest: dict[str, Any] | None,
) -> dict[str, Any]:
    """One drafter's line of study.json."""
    rec = record or {}
    entry: dict[str, Any] = {
        "name": name,
        "share_ja": rec.get("share"),
        "training": None
        if record is None
        else {
            "tokens_seen": rec.get("tokens_seen"),
            "steps": rec.get("steps"),
            "seed": _get(rec, "config", "seed"),
            "lr": _get(rec, "config", "lr"),
            "tokens_per_step": rec.get("tokens_per_step"),
            "final_loss": (rec.get("loss_curve") or [{}])[-1].get("loss"),
            "weights_sha256": _get(rec, "weights", "sha256"),
            "commit": rec.get("commit"),
        },
    }
    if manifest is None:
        entry["run"] = {"value": None, "reason": "no run directory (trace missing or failed)"}
    else:
        entry["run"] = {
            "status": manifest.get("status"),
            "reconciled_exactly": _get(manifest, "reconciliation", "exact"),
            "device": _get(manifest, "engine", "device", "name"),
            "dtype": _get(manifest, "engine", "dtype") or manifest.get("dtype"),
            "vllm_version": manifest.get("vllm_version"),
            "tokenlens_version": manifest.get("tokenlens_version"),
            "drafter": _get(manifest, "speculative", "model"),
            "signature": manifest.get("signature"),
        }
    if summary is None:
        entry["analysis"] = {
            "value": None,
            "reason": "no summary.json (analysis missing or failed)",
        }
        return entry
    fam = _get(summary, "families", "trained") or {}
    entry["analysis"] = {
        "rules_hash": _get(summary, "settings", "rules_hash"),
        "delta": _get(summary, "settings", "delta"),
        "prompts": summary.get("prompts"),
        "acceptance": {lang: _rate(_get(fam, "acceptance", lang)) for lang in ("ja", "en")},
        "acceptance_judged": {
            lang: _rate(_get(fam, "acceptance_judged", lang)) for lang in ("ja", "en")
        },
        "gap_judged": _pick(_get(summary, "gap", "judged"), INTERVAL) or _missing("gap.judged"),
        "gap_length_standardised": length_standardised(summary),
        "within_confidence": _pick(_get(summary, "h2_contrast", "within_trained"), INTERVAL)
        or _missing("h2_contrast.within_trained"),
        "control_within_confidence": _pick(
            _get(summary, "h2_contrast", "within_training_free"), INTERVAL
        )
        or _missing("h2_contrast.within_training_free"),
        "hypotheses": {
            h: {
                **(_pick(_get(summary, "hypotheses", h), VERDICT) or {}),
                "check": _pick(_get(summary, "hypotheses", h, "check"), (*INTERVAL, "reading")),
            }
            for h in ("H1", "H2")
        },
    }
    return entry


def _value(e: dict[str, Any], *keys: str) -> float | None:
    v = _get(e, "analysis", *keys)
    return float(v) if isinstance(v, int | float) else None


def checks(entries: list[dict[str, Any]], delta: float = 0.02) -> dict[str, Any]:
    """The control's predictions read off the entries (reports/gpu/control/README.md)."""
    tuned = sorted(
        (e for e in entries if e.get("share_ja") is not None), key=lambda e: float(e["share_ja"])
    )
    base = next((e for e in entries if e.get("share_ja") is None), None)
    out: dict[str, Any] = {}
    for key, path in (
        ("gap_judged", ("gap_judged", "value")),
        ("within_confidence", ("within_confidence", "value")),
    ):
        vals = [_value(e, *path) for e in tuned]
        out[f"{key}_by_share"] = {str(e["share_ja"]): v for e, v in zip(tuned, vals, strict=True)}
        known = [v for v in vals if v is not None]
        out[f"{key}_ordered_with_share"] = (
            all(a < b for a, b in pairwise(known))
            if len(known) == len(vals) and len(vals) >= 2
            else None
        )
    zero = next((e for e in tuned if float(e["share_ja"]) == 0.0), None)
    if zero is None or zero.get("analysis", {}).get("value", 0) is None:
        out["planted_deficit_found"] = {"value": None, "reason": "no analysed 0% drafter"}
    else:
        hi95 = _value(zero, "gap_judged", "ci_high")
        hi90 = _value(zero, "gap_judged", "decision_high")
        h2 = _get(zero, "analysis", "hypotheses", "H2", "verdict")
        out["planted_deficit_found"] = {
            "gap_beyond_minus_delta_95": None if hi95 is None else hi95 < -delta,
            "gap_beyond_minus_delta_90": None if hi90 is None else hi90 < -delta,
            "h2_verdict": h2,
            "value": (hi95 is not None and hi95 < -delta) and h2 == "supported",
        }
    out["manipulation"] = _manipulation(tuned, base)
    h1 = [(e["name"], _value(e, "hypotheses", "H1", "effect")) for e in entries]
    known = [v for _, v in h1 if v is not None]
    out["h1_effect_by_drafter"] = dict(h1)
    out["h1_effect_spread"] = max(known) - min(known) if len(known) >= 2 else None
    out["note"] = (
        "Per-drafter intervals resample prompt pairs within one analysis; "
        "differences between drafters carry no interval here."
    )
    return out


def _manipulation(tuned: list[dict[str, Any]], base: dict[str, Any] | None) -> dict[str, Any]:
    """Did the fine-tune raise acceptance in the language trained on (vs the untuned)?"""
    if base is None:
        return {"value": None, "reason": "the untuned drafter was not analysed"}
    out: dict[str, Any] = {}
    for share, lang in ((0.0, "en"), (1.0, "ja")):
        e = next((x for x in tuned if float(x["share_ja"]) == share), None)
        a = None if e is None else _value(e, "acceptance_judged", lang, "rate")
        b = _value(base, "acceptance_judged", lang, "rate")
        out[f"share_{share:g}_{lang}_judged_minus_untuned"] = (
            None if a is None or b is None else a - b
        )
    return out


def build_study(
    records: dict[str, Any], runs: Path, analyses: Path, names: list[str]
) -> dict[str, Any]:
    """study.json from the training records and the run and analysis directories."""
    entries = []
    for name in names:
        summary = _load(analyses / name / "summary.json")
        manifest = _load(runs / name / "manifest.json")
        entries.append(
            drafter_entry(name, records.get("drafters", {}).get(name), summary, manifest)
        )
    control = _load(runs / "ngram" / "manifest.json")
    delta = next((d for e in entries if isinstance(d := _get(e, "analysis", "delta"), float)), 0.02)
    return {
        "what": "positive control of issue 32: drafters fine-tuned on the target's own answers "
        "at set Japanese shares (reports/gpu/control/README.md)",
        "commit": records.get("commit"),
        "training_tokens_per_drafter": records.get("tokens_per_drafter"),
        "generation": records.get("generation"),
        "prompts_check": records.get("prompts_check"),
        "control_run": None
        if control is None
        else {
            "method": _get(control, "speculative", "method"),
            "k": _get(control, "speculative", "num_speculative_tokens"),
            "status": control.get("status"),
            "reconciled_exactly": _get(control, "reconciliation", "exact"),
            "device": _get(control, "engine", "device", "name"),
        },
        "drafters": entries,
        "checks": checks(entries, delta),
        "gap_differences": gap_differences(analyses, entries),
    }


def gap_differences(analyses: Path, entries: list[dict[str, Any]]) -> dict[str, Any]:
    """Paired differences of the judged gap: each tuned drafter minus the untuned one,
    and the lowest share minus the highest (from the analyses' tokens.parquet)."""
    paths = {e["name"]: analyses / e["name"] / "tokens.parquet" for e in entries}
    missing = sorted(n for n, p in paths.items() if not p.exists())
    counts = {n: read_counts(p) for n, p in paths.items() if p.exists()}
    tuned = sorted(
        (e for e in entries if e.get("share_ja") is not None and e["name"] in counts),
        key=lambda e: float(e["share_ja"]),
    )
    base = [e["name"] for e in entries if e.get("share_ja") is None and e["name"] in counts]
    wanted = [(e["name"], b) for e in tuned for b in base]
    if len(tuned) >= 2:
        wanted.append((tuned[0]["name"], tuned[-1]["name"]))
    if not wanted:
        return {"value": None, "reason": f"tokens.parquet missing for {missing}"}
    out = contrasts(counts, wanted)
    out["missing"] = missing
    return out


def _load(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
