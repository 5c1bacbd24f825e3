"""What a simulated study plants: the target's confidence process and each drafter's agreement.

Nothing here is the estimator's model. The estimator bins the target's top-1
probability and compares acceptance rates by bin; the test bed instead generates

- the target's confidence from the *text*: logit q_t = intercept + score(token
  features of the real token at t) + topic difficulty of the prompt pair + a prompt
  effect + serially correlated token noise (an AR(1) part and a white part). For
  Japanese the feature score is ``s' + h (s - s')``, where ``s`` is the Japanese
  token's own score and ``s'`` the English score at the same quantile
  (:func:`~tokenlens.testing.text.rank_matched`): ``h = 0`` makes Japanese text
  exactly as predictable as English, ``h = 1`` lets its own tokens decide. H1 is
  ``h > 0`` with weights under which Japanese tokens (byte fragments, script
  changes, rare BPE merges) are harder;
- each drafter's agreement with the target from a power curve of the confidence,
  ``p = ceiling * q ** power`` (not logistic), raised to ``exp(-(language effect +
  prompt effect + request effect + topic loading))`` and thresholded with an AR(1)
  Gaussian copula, so agreement runs in streaks inside a request. The prompt effect
  is shared by every run of the study (partly across drafters too, and partly by the
  two prompts of a JA/EN translation pair: ``pair_share`` is the correlation of the
  two, measured at 0.5-0.6 on the real study), the request effect is drawn per run.
  H2 is a negative language effect for Japanese on the trained drafter only;
- n-gram drafting offers a draft only where its lookup matches (``offer``), as vLLM's
  n-gram proposer does.

Parameters were calibrated to the committed verdict-grade study of the embedded
Qwen2.5-Coder pair (60 JA/EN pairs, 128-token outputs; see
:mod:`tokenlens.testing.calibration` for the figures, including the spread of
acceptance at equal confidence and its correlation within translation pairs, which
set the precision of every within-confidence gap) and the planted effects to about
-10 pp of the estimand they should move (see :mod:`tokenlens.testing.truth`). The
default study design is that study's: up to 128 output tokens, 12% of requests
stopping earlier.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType

Weights = tuple[tuple[str, float], ...]
"""(feature, weight) pairs: hashable, so scenarios can key caches."""

# Token-feature weights of the confidence logit.
# MEASURED: least squares of logit(top-1 probability) on the features, over the 1,503
# output tokens of the calibration traces (10 JA + 10 EN prompts, Qwen2.5-Coder 1.5B).
# Word/morpheme-initial tokens are much harder; Japanese has fewer of them, so with
# these weights Japanese text is *more* predictable (as it was in the real traces).
MEASURED_WEIGHTS: Weights = (
    ("fragment", -1.24),
    ("change", 0.06),
    ("initial", -4.02),
    ("log_rank", -0.245),
    ("punct", 0.19),
)
# HARD_JA: the same, but byte fragments, script changes and rare merges cost the
# target more: the features Japanese text has more of. The test bed's default text
# process (H1 is then switched on and off with the Japanese strength h).
HARD_JA_WEIGHTS: Weights = (
    ("fragment", -3.0),
    ("change", -1.5),
    ("initial", -4.02),
    ("log_rank", -0.6),
    ("punct", 0.19),
)


@dataclass(frozen=True)
class Confidence:
    """The target's top-1 probability per output token (logit scale parameters)."""

    weights: Weights = HARD_JA_WEIGHTS
    intercept: float = 10.0
    ja_strength: float = 0.0
    ja_offset: float = 0.0
    floor: float = -0.8
    pair_sd: float = 0.6
    prompt_sd: float = 1.6
    noise_sd: float = 3.0
    ar_share: float = 0.4
    ar_rho: float = 0.65


@dataclass(frozen=True)
class Drafter:
    """One drafting method's agreement with the target and when it offers drafts."""

    method: str
    ceiling: float
    power: float
    lang_effect: tuple[tuple[str, float], ...] = ()
    effect_sd: float = 0.0
    prompt_sd: float = 0.5
    shared: float = 0.5
    pair_share: float = 0.0
    request_sd: float = 0.15
    topic_load: float = 0.0
    rho: float = 0.5
    offer: float = 1.0
    offer_prompt_sd: float = 0.0
    offer_rho: float = 0.0

    def effect(self, lang: str) -> float:
        """The drafter's agreement shift for ``lang`` (0 when none is planted)."""
        return dict(self.lang_effect).get(lang, 0.0)

    @property
    def training_free(self) -> bool:
        return self.method in {"ngram", "suffix"}


MEASURED_TEXT = Confidence(weights=MEASURED_WEIGHTS, intercept=7.0, ja_strength=1.0, ja_offset=1.0)
"""The target as measured: Japanese more predictable, by more than its tokens explain."""

TRAINED = Drafter(
    "draft_model",
    ceiling=0.995,
    power=0.7,
    prompt_sd=0.3,
    pair_share=0.9,
    request_sd=0.05,
    rho=0.2,
)
NGRAM = Drafter(
    "ngram",
    ceiling=0.68,
    power=3.5,
    prompt_sd=0.65,
    pair_share=0.9,
    rho=0.7,
    offer=0.55,
    offer_prompt_sd=0.3,
    offer_rho=0.5,
)


@dataclass(frozen=True)
class Scenario:
    """A planted world: text process, drafters, lengths; and which hypotheses hold."""

    name: str
    description: str
    confidence: Confidence = Confidence()
    drafters: tuple[Drafter, ...] = (TRAINED, NGRAM)
    k: int = 3
    max_tokens: int = 128
    stop_share: float = 0.12
    min_tokens: int = 30
    h1: bool | None = False
    h2: bool | None = False

    def drafter(self, method: str) -> Drafter:
        for d in self.drafters:
            if d.method == method:
                return d
        raise KeyError(method)

    def with_drafter(self, method: str, **changes: object) -> Scenario:
        """A copy with one drafter's parameters changed (counterfactuals, calibration)."""
        drafters = tuple(
            replace(d, **changes) if d.method == method else d  # type: ignore[arg-type]
            for d in self.drafters
        )
        return replace(self, drafters=drafters)

    def with_confidence(self, **changes: object) -> Scenario:
        return replace(self, confidence=replace(self.confidence, **changes))  # type: ignore[arg-type]


H1_STRENGTH = 1.0
H2_EFFECT = -0.57
H2_EFFECT_SD = 0.3
NGRAM_JA_COPY = 0.9
NGRAM_JA_COPY_SD = 0.5
# The full study: the drafter about 1 pp worse on Japanese at equal confidence.
MEASURED_JA_TRAINED = -0.08
SHARED_JA_TRAINED = -0.37  # both about -6 pp within-confidence
SHARED_JA_FREE = -0.265


def _h2(d: Drafter, effect: float, sd: float = 0.0) -> Drafter:
    return replace(d, lang_effect=(("ja", effect),), effect_sd=sd)


SCENARIOS: Mapping[str, Scenario] = MappingProxyType(
    {
        s.name: s
        for s in (
            Scenario("null", "no H1, no H2: Japanese text as predictable as English"),
            Scenario(
                "h1",
                "H1: Japanese tokens are less predictable for the target; agreement "
                "depends on confidence the same way for both languages",
                confidence=Confidence(ja_strength=H1_STRENGTH),
                h1=True,
            ),
            Scenario(
                "h2",
                "H2: the trained drafter agrees less on Japanese at equal confidence; "
                "n-gram unaffected",
                drafters=(_h2(TRAINED, H2_EFFECT, H2_EFFECT_SD), NGRAM),
                h2=True,
            ),
            Scenario(
                "h1_h2",
                "H1 and H2 together",
                confidence=Confidence(ja_strength=H1_STRENGTH),
                drafters=(_h2(TRAINED, H2_EFFECT, H2_EFFECT_SD), NGRAM),
                h1=True,
                h2=True,
            ),
            Scenario(
                "ja_advantage",
                "Japanese is more predictable for the target (the weights measured on the "
                "real traces): nothing to explain",
                confidence=MEASURED_TEXT,
                h1=None,
                h2=False,
            ),
            Scenario(
                "ngram_ja_advantage",
                "n-gram agrees MORE on Japanese at equal confidence (it copies from the "
                "prompt, as in the real traces); the trained drafter has no deficit. The "
                "difference in differences is negative without any H2",
                drafters=(TRAINED, _h2(NGRAM, NGRAM_JA_COPY, NGRAM_JA_COPY_SD)),
                h2=False,
            ),
            Scenario(
                "shared_deficit",
                "both drafters agree less on Japanese at equal confidence (a text effect "
                "the target's confidence does not show): not H2, and not composition",
                drafters=(_h2(TRAINED, SHARED_JA_TRAINED), _h2(NGRAM, SHARED_JA_FREE)),
                h1=None,
                h2=False,
            ),
            Scenario(
                "measured",
                "as measured on the Qwen2.5-Coder pair: Japanese more predictable and "
                "n-gram copying more on Japanese",
                confidence=MEASURED_TEXT,
                drafters=(
                    _h2(TRAINED, MEASURED_JA_TRAINED),
                    _h2(NGRAM, NGRAM_JA_COPY, NGRAM_JA_COPY_SD),
                ),
                h1=None,
                h2=False,
            ),
        )
    }
)
"""The standard scenarios. ``h1``/``h2``: True = planted, False = absent, None = the
mechanism is not one of the two (e.g. a Japanese advantage): any verdict but
``supported`` is acceptable."""
