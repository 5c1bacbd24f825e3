"""H1 / H2 verdicts from the numbers, by the rules in docs/analysis.md ("Verdicts").

:func:`~tokenlens.analysis.parts.compute_parts` takes the joined frame and returns what
both rules read (:class:`~tokenlens.analysis.parts.Parts`: per drafter family its rates,
judged gap and confidence split, and H2's contrast); :func:`decide` returns
``{"H1": ..., "H2": ...}``, each a block that :mod:`~tokenlens.analysis.summarize` types
as a
:class:`~tokenlens.analysis.summary_verdicts.Hypothesis`. Verdicts: ``supported``,
``not_supported``, ``no_japanese_deficit``, ``inconclusive``, ``insufficient_data``.
H1 reads the trained drafters' shared composition by the target's confidence (check: the
n-gram drafter's); H2 the difference in differences of the within-confidence gap
(check: the trained drafters' own). Families are never pooled.
"""

from __future__ import annotations

import hashlib
import inspect
import json
from collections.abc import Callable, Mapping
from dataclasses import fields, replace
from typing import Any

import pandas as pd

from tokenlens.analysis.bootstrap import Resampler
from tokenlens.analysis.code_identity import code_text
from tokenlens.analysis.decompose import (
    CONF_BINS,
    EN,
    JA,
    Support,
    has_pair,
)
from tokenlens.analysis.h2_bound import BOUNDED_LABEL, bounded_effect, bounded_sentence
from tokenlens.analysis.parts import Parts, prompts_per_lang
from tokenlens.analysis.power import effect_power, power_conjunction
from tokenlens.analysis.rules import (
    DECISION_KEYS,
    FREE,
    INCONCLUSIVE,
    INSUFFICIENT,
    NA,
    NO,
    NO_DEFICIT,
    TRAINED,
    YES,
    Rules,
    apply_control,
    bounded_reading,
    combine,
    conjoin,
    control_holds,
    decision_bounds,
    tri,
    verdict_of,
)
from tokenlens.analysis.summary_fields import typed
from tokenlens.analysis.summary_figures import Estimate
from tokenlens.analysis.summary_gaps import Family
from tokenlens.analysis.summary_verdicts import Check, Hypothesis, Power
from tokenlens.analysis.wording import (
    CONFIDENCE_CAVEAT,
    H2_CAVEAT,
    TOKEN_CAVEAT,
    no_deficit_sentence,
    reading_sentence,
    runs_phrase,
)
from tokenlens.format import interval_prose


def rules_identity(rules: Rules, support: Support) -> str:
    """A hash of the frozen rule set: δ, α, the minimum prompts, the support thresholds,
    the confidence bins and the code of the rules themselves (comments and docstrings
    aside). Recorded in the analysis signature (``rules:``): two analyses with the same
    hash read their figures by the same rules."""
    fns: tuple[Callable[..., Any], ...] = (tri, combine, conjoin, verdict_of, _rule)
    fns += (control_holds, apply_control, bounded_reading)
    code = [code_text(inspect.getsource(fn)) for fn in fns]
    text = json.dumps(
        {
            "rules": rules.to_json(),
            "support": support.to_json(),
            "confidence_bins": CONF_BINS,
            "code": code,
        },
        sort_keys=True,
    )
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def pp(effect: Estimate | Mapping[str, Any] | None) -> str:
    """``-6.2 pp (95% CI -7.9 to -4.6)``; ``not estimable (why)`` for a null. A block is
    read as summary.json's reader reads it (:class:`Estimate`)."""
    return interval_prose(Estimate.parse(effect), "pp") if effect is not None else "not available"


def as_block(figure: Estimate | None) -> dict[str, Any] | None:
    """``figure`` as summary.json writes it: the form the rule functions read (their
    code is hashed into the rules' identity, :func:`rules_identity`, so it stays)."""
    return figure.to_json() if figure is not None else None


def scope_phrase(family: Family | None) -> str:
    """``judged positions, runs of draft_model at k = 1–5``: the rows and runs a
    family's figures read."""
    configs = family.configurations if family is not None else ()
    return "judged positions, " + runs_phrase((str(m), int(k)) for m, k in configs)


def _verdict(verdict: str, effect: Estimate | None, evidence: str, **extra: Any) -> Hypothesis:
    """A :class:`Hypothesis` reading ``effect``: its value and interval, the decision
    interval when it has both ends, why it has none (``not computed`` without a reason)."""
    e = effect or Estimate()
    decided = e.decision_low is not None and e.decision_high is not None
    missing = e.value is None or e.ci_low is None
    return Hypothesis(
        verdict=verdict,
        effect=e.value,
        ci_low=e.ci_low,
        ci_high=e.ci_high,
        decision_low=e.decision_low if decided else None,
        decision_high=e.decision_high if decided else None,
        not_estimable=(e.not_estimable or e.no_interval or "not computed") if missing else None,
        evidence=evidence,
        **extra,
    )


def decide(frame: pd.DataFrame, rs: Resampler, rules: Rules, parts: Parts) -> dict[str, Hypothesis]:
    """``{"H1": Hypothesis, "H2": Hypothesis}`` by the rules of docs/analysis.md."""
    if not has_pair(frame):
        # A missing language is the limiting case of too few prompts: insufficient data
        # (what --help and the contract promise), not an inconclusive reading of data.
        found = prompts_per_lang(frame)
        msg = (
            f"Too little data for a verdict: {found.get(JA, 0)} Japanese and "
            f"{found.get(EN, 0)} English prompts; the verdicts need both languages"
        )
        return {h: _verdict(INSUFFICIENT, None, msg) for h in ("H1", "H2")}
    out = {}
    for name, decide_one, fams in (
        ("H1", _h1, (TRAINED if TRAINED in parts.families else FREE, FREE)),
        ("H2", _h2, (TRAINED, FREE)),
    ):
        # The prompts behind this hypothesis: every family it reads, both languages.
        counts = [
            parts.families[f].prompts for f in dict.fromkeys(fams) if f in parts.families
        ] or [parts.prompts]
        ja = min(c.get(JA, 0) for c in counts)
        en = min(c.get(EN, 0) for c in counts)
        h = decide_one(parts, rules, min(ja, en))
        if min(ja, en) < rules.min_prompts:
            h = replace(
                h,
                verdict=INSUFFICIENT,
                evidence=(
                    f"Too little data for a verdict: {ja} Japanese and {en} English prompts; "
                    f"the rules need at least {rules.min_prompts} per language. {h.evidence}"
                ),
            )
        out[name] = h
    return out


def _rule(
    gap_j: dict[str, Any] | None,
    reading: str,
    check: str | None,
    rules: Rules,
    both: bool = False,
    scope: str = "judged positions",
) -> tuple[str, str]:
    """(verdict, sentence to add): no deficit first, then the symmetric veto rule
    (``both``: the conjunction rule)."""
    if tri(gap_j, rules.delta) == NO:  # the judged gap's interval lies above −δ
        assert gap_j is not None
        bounds = dict(zip(DECISION_KEYS, decision_bounds(gap_j), strict=True))
        return NO_DEFICIT, (
            f" The judged gap is {pp(gap_j)}. "
            + no_deficit_sentence(rules.delta, scope, bounds, rules.decision_level)
            + "."
        )
    verdict = conjoin(reading, check or NA) if both else combine(reading, check)
    if verdict == INCONCLUSIVE and reading in (YES, NO):
        if both and reading == YES and check != NO:
            return verdict, " The check is not decided: H2 needs both."
        return verdict, " The check disagrees with the effect."
    return verdict, ""


def _h1(parts: Parts, rules: Rules, n: int) -> Hypothesis:
    fam = TRAINED if TRAINED in parts.families else FREE
    block = parts.families.get(fam)
    dec = block.confidence if block is not None else None
    if parts.conf_rows == 0:
        return _verdict(
            INCONCLUSIVE,
            None,
            "The runs carry no target logprobs: the composition by the target's confidence "
            "cannot be measured (trace with --logprobs).",
            reading=NA,
        )
    if dec is None:
        return _verdict(INCONCLUSIVE, None, "No judged Japanese and English rows to split.")
    effect = dec.composition
    reading = tri(as_block(effect), rules.delta)
    check = None
    check_reading = None
    free = parts.families.get(FREE)
    other = free.confidence if fam == TRAINED and free is not None else None
    if other is not None:
        check = other.composition
        check_reading = tri(as_block(check), rules.delta)
    gap_j = block.gap_judged if block is not None else None
    label = "trained drafters" if fam == TRAINED else "training-free drafters"
    support = dec.support
    assert support is not None and support.share_ja is not None and support.share_en is not None
    text = (
        f"Judged-acceptance gap of the {label} (Japanese minus English): {pp(gap_j)}. "
        f"Split by the target's confidence: shared composition {pp(effect)}, within "
        f"{pp(dec.within)}, out of support {pp(dec.out_of_support)} "
        f"({1 - support.share_ja:.0%} of Japanese and "
        f"{1 - support.share_en:.0%} of English rows lie outside the shared bins)."
    )
    if check is not None:
        text += f" Check, the n-gram drafter's shared composition: {pp(check)}."
    elif fam == TRAINED:
        text += " No training-free (n-gram) run on the same prompts: the check is missing."
    scope = scope_phrase(block)
    verdict, note = _rule(as_block(gap_j), reading, check_reading, rules, scope=scope)
    text += note
    check_scope = scope_phrase(free)
    statement = _statement(
        verdict,
        gap_j,
        rules,
        scope,
        [
            ("shared composition by the target's confidence", effect, reading, scope),
            ("check, the n-gram drafter's shared composition", check, check_reading, check_scope),
        ],
    )
    power = {
        **effect_power(as_block(effect), parts.df, rules, n),
        "rule": "effect alone: the check's veto, which binds only when the check reads "
        "no, is not modelled",
    }
    return _verdict(
        verdict,
        effect,
        text,
        family=fam,
        estimand="shared composition of the judged gap by the target's confidence",
        reading=reading,
        check=_check(check, check_reading, "shared composition, training-free drafters"),
        power=typed(Power, power),
        caveat=CONFIDENCE_CAVEAT + " " + TOKEN_CAVEAT,
        scope=scope,
        statement=statement,
    )


def _h2(parts: Parts, rules: Rules, n: int) -> Hypothesis:
    if TRAINED not in parts.families:
        return _verdict(
            INCONCLUSIVE, None, "No trained-drafter run: H2 concerns learned drafters.", reading=NA
        )
    if parts.conf_rows == 0:
        return _verdict(
            INCONCLUSIVE,
            None,
            "The runs carry no target logprobs: 'at equal target confidence' cannot be "
            "measured (trace with --logprobs).",
            reading=NA,
        )
    contrast = parts.contrast
    if contrast is None:
        return _verdict(
            INCONCLUSIVE,
            None,
            "H2 is a contrast against the training-free (n-gram) drafter on the same prompts; "
            "no n-gram run was given.",
            reading=NA,
        )
    effect, check = contrast.difference, contrast.within_trained
    reading = tri(as_block(effect), rules.delta)
    check_reading = tri(as_block(check), rules.delta)
    control = contrast.control
    bounded = None
    if control is not None and control.reason:  # the control does not hold: bound instead
        reading = bounded_reading(as_block(check), rules.control_range, rules.delta)
        bounded = bounded_effect(check, rules.control_range, reading)
    trained = parts.families[TRAINED]
    gap_j = trained.gap_judged
    text = (
        f"At equal target confidence, the trained drafters' Japanese gap is {pp(check)} and "
        f"the n-gram drafter's {pp(contrast.within_training_free)}; difference "
        f"{pp(effect)}."
    )
    scope = scope_phrase(trained)
    verdict, note = _rule(as_block(gap_j), reading, check_reading, rules, both=True, scope=scope)
    text += note
    free = parts.families.get(FREE)
    both_configs = [*trained.configurations, *(free.configurations if free else ())]
    contrast_scope = "judged positions, " + runs_phrase((str(m), int(k)) for m, k in both_configs)
    label = BOUNDED_LABEL.format(100 * rules.control_range)
    statement = _statement(
        verdict,
        gap_j,
        rules,
        scope,
        [
            (
                "difference in differences, trained minus n-gram within-confidence gap",
                effect,
                reading,
                contrast_scope,
            )
            if bounded is None
            else (label, bounded.interval, reading, scope),
            ("check, the trained drafters' within-confidence gap", check, check_reading, scope),
        ],
    )
    correlation = (contrast.correlation or {}).get("difference_within_trained")
    if control is not None and control.reason:  # the effect is not read (rules.apply_control)
        text += bounded_sentence(bounded, rules.control_range, rules.decision_level)
        power = Power(rule="conjunction", not_estimable=control.reason)
    else:
        block = power_conjunction(
            as_block(effect), as_block(check), correlation, parts.df, rules, n
        )
        power = typed(Power, block) or Power()
    return _verdict(
        verdict,
        effect,
        text,
        family=TRAINED,
        estimand="difference in differences of the within-confidence Japanese gap, "
        "trained minus training-free drafters",
        reading=reading,
        check=_check(check, check_reading, "within-confidence gap, trained drafters"),
        power=power,
        control=control,
        bounded=bounded,
        caveat=H2_CAVEAT + " " + CONFIDENCE_CAVEAT,
        scope=scope,
        statement=statement,
    )


def _statement(
    verdict: str,
    gate: Estimate | None,
    rules: Rules,
    scope: str,
    readings: list[tuple[str, Estimate | None, str | None, str]],
) -> str:
    """The verdict worded against its margin (:mod:`tokenlens.analysis.wording`): the
    gate's sentence for no deficit, else each reading with its rows, runs and interval."""
    level = rules.decision_level
    if verdict == NO_DEFICIT and gate is not None:
        bounds = dict(zip(DECISION_KEYS, decision_bounds(gate.to_json()), strict=True))
        return no_deficit_sentence(rules.delta, scope, bounds, level) + "."
    sentences = []
    for label, figure, reading, where in readings:
        if figure is None or reading is None:
            continue
        low, high = decision_bounds(figure.to_json())
        sentences.append(
            f"{label[0].upper()}{label[1:]}: "
            + reading_sentence(reading, rules.delta, where, low, high, level)
            + "."
        )
    return " ".join(sentences)


def _check(effect: Estimate | None, reading: str | None, name: str) -> Check | None:
    """The check a verdict read: ``effect`` with its ``name`` and ``reading``."""
    if effect is None:
        return None
    figure = {f.name: getattr(effect, f.name) for f in fields(Estimate)}
    return Check(**figure, name=name, reading=reading or NA)
