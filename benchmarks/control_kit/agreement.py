"""Next-token agreement of a drafter with the target, teacher-forced on the target's greedy
text, and the manipulation check built on it (issue 32: no trace for a failed fine-tune).

``measure`` runs a causal LM over packed examples (prompt + the target's greedy answer;
``mixing.pack``) and counts, at every position that predicts an answer token, whether
the model's argmax is the target's token (top-1 match) and the token's log-probability.
Counts are kept per example so that an interval resamples whole prompt pairs. On a
greedy target, a draft token is accepted exactly when it is this argmax given the
accepted prefix, so top-1 agreement here is the per-token quantity acceptance is built
from (without the chain over k).

``check`` states the rule that stops the pipeline before any trace: the lowest-share
drafter's Japanese agreement is below the highest-share drafter's by at least
``margin``, and its JA − EN agreement gap is below the untuned drafter's by at least
``margin`` (the planted deficit).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .mixing import Example, pack

LANGS = ("ja", "en")


@dataclass(frozen=True)
class Counts:
    """Per example: its pair, language, top-1 matches, positions, summed log-probability."""

    pair: tuple[str, ...]
    lang: tuple[str, ...]
    matched: np.ndarray
    positions: np.ndarray
    logprob: np.ndarray


def measure(
    model: Any,
    examples: list[Example],
    pairs: list[str],
    *,
    seq_len: int = 1024,
    rows: int = 8,
    device: Any = None,
) -> Counts:
    """Teacher-forced top-1 agreement of ``model`` with each example's answer tokens.

    Examples are packed one per segment (position ids restart; no attention between
    them), ``rows`` packed rows a forward pass, bfloat16 autocast on CUDA.
    """
    import torch

    dev = device or next(model.parameters()).device
    n = len(examples)
    matched = np.zeros(n, dtype=np.int64)
    positions = np.zeros(n, dtype=np.int64)
    logprob = np.zeros(n, dtype=np.float64)
    packed = pack(examples, seq_len, pad_id=0)
    owner = _owners(examples, packed.loss_mask, seq_len)
    was_training = model.training
    model.eval()
    with torch.no_grad():
        for lo in range(0, packed.input_ids.shape[0], rows):
            sl = slice(lo, lo + rows)
            ids = torch.tensor(packed.input_ids[sl], device=dev)
            pos = torch.tensor(packed.position_ids[sl], device=dev)
            mask_np = packed.loss_mask[sl]
            mask = torch.tensor(mask_np, device=dev)
            targets = torch.roll(ids, shifts=-1, dims=1)[mask]
            with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=dev.type == "cuda"):
                hidden = model.model(input_ids=ids, position_ids=pos, use_cache=False)
                logits = model.lm_head(hidden.last_hidden_state[mask]).float()
            top = logits.argmax(-1) == targets
            lp = torch.log_softmax(logits, -1).gather(1, targets[:, None])[:, 0]
            who = owner[sl][mask_np]
            np.add.at(matched, who, top.cpu().numpy().astype(np.int64))
            np.add.at(positions, who, 1)
            np.add.at(logprob, who, lp.double().cpu().numpy())
    model.train(was_training)
    return Counts(tuple(pairs), tuple(e.lang for e in examples), matched, positions, logprob)


def _owners(examples: list[Example], mask: np.ndarray, seq_len: int) -> np.ndarray:
    """The example index of every loss position, in ``pack``'s layout."""
    owner = np.full(mask.shape, -1, dtype=np.int64)
    r, used = 0, 0
    for i, ex in enumerate(examples):
        n = len(ex.prompt_ids) + len(ex.answer_ids)
        if used + n > seq_len:
            r, used = r + 1, 0
        owner[r, used + len(ex.prompt_ids) - 1 : used + n - 1] = i
        used += n
    return owner


def summarise(c: Counts, *, resamples: int = 2000, seed: int = 0) -> dict[str, Any]:
    """Agreement per language and the JA − EN gap, each with a 95% interval that
    resamples whole prompt pairs; the mean log-probability per language."""
    pairs = sorted(set(c.pair))
    idx = {p: i for i, p in enumerate(pairs)}
    m = np.zeros((len(pairs), 2))
    t = np.zeros((len(pairs), 2))
    lp = np.zeros(2)
    for k, (p, lang) in enumerate(zip(c.pair, c.lang, strict=True)):
        j = LANGS.index(lang)
        m[idx[p], j] += c.matched[k]
        t[idx[p], j] += c.positions[k]
        lp[j] += c.logprob[k]
    rng = random.Random(seed)
    boot = np.array([[rng.randrange(len(pairs)) for _ in pairs] for _ in range(resamples)])
    out: dict[str, Any] = {"pairs": len(pairs)}
    rates = []
    for j, lang in enumerate(LANGS):
        n = float(t[:, j].sum())
        rate = float(m[:, j].sum() / n) if n else None
        rates.append(rate)
        out[lang] = {
            "agreement": rate,
            "positions": int(n),
            "mean_logprob": float(lp[j] / n) if n else None,
            **_interval(m[boot, j].sum(1), t[boot, j].sum(1)),
        }
    if None in rates:
        out["gap"] = {"value": None, "reason": "a language has no positions"}
    else:
        g = _ratio(m[boot, 0].sum(1), t[boot, 0].sum(1)) - _ratio(
            m[boot, 1].sum(1), t[boot, 1].sum(1)
        )
        lo, hi = np.nanpercentile(g, [2.5, 97.5])
        value = float(rates[0]) - float(rates[1])  # type: ignore[arg-type]
        out["gap"] = {"value": value, "ci_low": float(lo), "ci_high": float(hi)}
    return out


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """num / den, NaN where a resample drew no position (left out of the percentiles)."""
    return np.where(den > 0, num / np.maximum(den, 1), np.nan)


def _interval(num: np.ndarray, den: np.ndarray) -> dict[str, float]:
    lo, hi = np.nanpercentile(_ratio(num, den), [2.5, 97.5])
    return {"ci_low": float(lo), "ci_high": float(hi)}


def check(
    by_drafter: dict[str, dict[str, Any]],
    shares: dict[str, float],
    *,
    untuned: str,
    margin: float,
) -> dict[str, Any]:
    """The manipulation check on held-out agreement summaries (``summarise``).

    Passes when (1) JA agreement(lowest share) <= JA agreement(highest share) − margin,
    and (2) gap(lowest share) <= gap(untuned) − margin. Also reported, not required:
    whether each drafter raised agreement in the language it was trained on most.
    """
    lo = min(shares, key=lambda n: shares[n])
    hi = max(shares, key=lambda n: shares[n])

    def val(name: str, *keys: str) -> float | None:
        d: Any = by_drafter.get(name)
        for k in keys:
            d = d.get(k) if isinstance(d, dict) else None
        return d if isinstance(d, float | int) else None

    ja_lo, ja_hi = val(lo, "ja", "agreement"), val(hi, "ja", "agreement")
    gap_lo, gap_base = val(lo, "gap", "value"), val(untuned, "gap", "value")
    conditions = {
        "ja_lowest_below_highest": None
        if ja_lo is None or ja_hi is None or lo == hi
        else ja_lo <= ja_hi - margin,
        "gap_lowest_below_untuned": None
        if gap_lo is None or gap_base is None
        else gap_lo <= gap_base - margin,
    }
    trained_up = {}
    for name, s in shares.items():
        lang = "ja" if s >= 0.5 else "en"
        a, b = val(name, lang, "agreement"), val(untuned, lang, "agreement")
        trained_up[name] = (
            None if a is None or b is None else {"lang": lang, "minus_untuned": a - b}
        )
    passed = all(v is True for v in conditions.values())
    return {
        "rule": f"JA agreement of {lo} <= that of {hi} - {margin:g}, and JA-EN gap of {lo} "
        f"<= that of {untuned} - {margin:g} (top-1, teacher-forced on the target's greedy "
        "held-out answers)",
        "margin": margin,
        "lowest": lo,
        "highest": hi,
        "values": {
            "ja_lowest": ja_lo,
            "ja_highest": ja_hi,
            "gap_lowest": gap_lo,
            "gap_untuned": gap_base,
        },
        "conditions": conditions,
        "trained_language_minus_untuned": trained_up,
        "passed": passed,
    }


def load_examples(path: Path) -> tuple[list[Example], list[str]]:
    """The held-out generation file's examples (empty answers left out) and their pairs."""
    examples, pairs = [], []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line:
            continue
        row = json.loads(line)
        if row["answer_ids"]:
            examples.append(
                Example(row["lang"], tuple(row["prompt_ids"]), tuple(row["answer_ids"]))
            )
            pairs.append(str(row["pair"]))
    return examples, pairs


def run_check(
    records: dict[str, Any],
    heldout: Path,
    dirs: dict[str, Path],
    *,
    untuned: str,
    margin: float,
    seq_len: int,
    rows: int,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Measure every drafter in ``dirs`` (``untuned`` among them) on ``heldout``, write
    each trained one's summary to ``records["drafters"][name]["heldout_agreement"]``, the
    untuned one's, every untrained reference's (``reference_heldout_agreement``) and the
    check's result to ``records``; the result."""
    import torch
    from transformers import AutoModelForCausalLM

    drafters = records.get("drafters", {})
    if not drafters or not heldout.exists():
        raise SystemExit(f"check: needs trained drafters and {heldout}")
    examples, pairs = load_examples(heldout)
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    by: dict[str, dict[str, Any]] = {}
    for name, path in dirs.items():
        model = AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float32).to(dev)
        by[name] = summarise(measure(model, examples, pairs, seq_len=seq_len, rows=rows))
        del model
        log(
            f"check {name}: agreement JA {by[name]['ja']['agreement']:.4f} "
            f"EN {by[name]['en']['agreement']:.4f} gap {by[name]['gap']['value']:+.4f}"
        )
        if name in drafters:
            drafters[name]["heldout_agreement"] = by[name]
    shares = {n: float(drafters[n]["share"]) for n in drafters}
    result = check(by, shares, untuned=untuned, margin=margin)
    records["untuned_heldout_agreement"] = by[untuned]
    records["reference_heldout_agreement"] = {n: by[n] for n in dirs if n not in drafters}
    records["manipulation_check"] = {**result, "heldout": str(heldout), "examples": len(examples)}
    return result
