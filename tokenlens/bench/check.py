"""Plan validation in full (format, corpora, vLLM's accepted names) and ``bench --check``."""

from __future__ import annotations

from pathlib import Path

from tokenlens.bench.plan import Plan, load_plan
from tokenlens.bench.vllm_check import check_plan, vllm_vocabulary
from tokenlens.errors import TokenlensError
from tokenlens.models.check import model_problem


def model_problems(plan: Plan) -> list[str]:
    """Every model and drafter of ``plan`` that vLLM could not load, one line each.

    Checked with the same rule as ``trace --model`` (:func:`model_problem`), so a typo
    fails ``bench --check`` instead of an engine start minutes into the run.
    """
    problems = []
    for model in plan.models:
        problem = model_problem(model.path)
        if problem is not None:
            problems.append(f"[[model]] {model.name!r}.path: {problem}")
    for method in plan.methods:
        problem = model_problem(method.draft_model)
        if problem is not None:
            problems.append(f"[[method]] {method.name!r}.draft_model: {problem}")
    return problems


def validated_plan(path: Path, require_vllm: bool = True) -> Plan:
    """Load ``path`` and check it against the installed vLLM; one error line if anything fails.

    Without vLLM installed (a client measuring a remote server) the vLLM check is
    skipped unless ``require_vllm``.
    """
    plan = load_plan(path)
    if require_vllm:  # the models of a local engine (a server names its own)
        problems = model_problems(plan)
        if problems:
            more = f" (and {len(problems) - 1} more problems)" if len(problems) > 1 else ""
            raise TokenlensError(f"{path}: {problems[0]}{more}")
    try:
        vocab = vllm_vocabulary()
    except ImportError:
        if not require_vllm:
            return plan
        raise TokenlensError(
            "checking a plan needs vLLM installed "
            "(scripts/setup.sh, or pip install 'tokenlens[gpu]')"
        ) from None
    problems = check_plan(plan, vocab)
    if problems:
        more = f" (and {len(problems) - 1} more problems)" if len(problems) > 1 else ""
        raise TokenlensError(f"{path}: {problems[0]}{more}")
    return plan


def describe_plan(path: Path) -> str:
    """The plan's cases, one line each, after every check passed."""
    plan = validated_plan(path)
    engines = len({c.engine_key for c in plan.cases})
    requests = sum((plan.warmup + plan.repeats) * len(c.prompts) for c in plan.cases)
    lines = [
        f"plan {plan.name!r}: {len(plan.cases)} cases on {engines} engines, "
        f"{requests} requests (warm-up {plan.warmup}, repeats {plan.repeats}); "
        "all keys accepted by the installed vLLM",
    ]
    lines += [f"  {c.case_id}  ({len(c.prompts)} prompts)" for c in plan.cases]
    return "\n".join(lines)
