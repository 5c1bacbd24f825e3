"""Test infrastructure: a simulator of JA/EN speculative-decoding studies with planted causes.

Not part of the tool's pipeline (nothing under ``tokenlens`` outside this package
imports it). The tests and ``benchmarks/bench_verdicts.py`` use it as the ground
truth the analysis is judged against, so it deliberately shares none of the
estimator's assumptions: the target's confidence comes from real token features of
real text (:mod:`.text`), agreement from non-logistic curves with prompt and request
effects and serial correlation (:mod:`.scenarios`, :mod:`.simulate`), events from
vLLM's step process (:mod:`.steps`); truths come from large populations and
counterfactuals (:mod:`.truth`); the parameters are calibrated to real traces
(:mod:`.calibration`). :mod:`.rundirs` writes studies as run directories.

Typical use::

    from tokenlens.testing import SCENARIOS, simulate_study
    study = simulate_study(SCENARIOS["h2"], n_pairs=30, seed=1)
    frame = study.frame()            # the analysis frame, every run
    paths = write_study(study, tmp)  # run directories for analyze
"""

from tokenlens.testing.rundirs import write_study
from tokenlens.testing.scenarios import SCENARIOS, Confidence, Drafter, Scenario
from tokenlens.testing.simulate import RunSpec, Study, simulate_study
from tokenlens.testing.step_process import StepEvents, speculate
from tokenlens.testing.truth import ESTIMANDS, estimands, mechanisms, population, truth

__all__ = [
    "ESTIMANDS",
    "SCENARIOS",
    "Confidence",
    "Drafter",
    "RunSpec",
    "Scenario",
    "StepEvents",
    "Study",
    "estimands",
    "mechanisms",
    "population",
    "simulate_study",
    "speculate",
    "truth",
    "write_study",
]
