"""Check a plan against the pinned vLLM's own config definitions, without loading a model.

Method names come from vLLM's ``SpeculativeMethod`` Literal, speculative options from
the fields of ``SpeculativeConfig``, engine keys from ``EngineArgs``, dtypes, load
formats and quantization methods from their Literals/lists. So a plan written for a GPU
box (Qwen3.5 with MTP and D-Flash) is checked on a laptop, and a plan that names
something this vLLM does not know fails before any engine starts.
"""

from __future__ import annotations

import dataclasses
import logging
import typing
from dataclasses import dataclass

from tokenlens.bench.plan import BASELINE, Plan


@dataclass(frozen=True)
class VllmVocabulary:
    """The names the installed vLLM accepts, read from its config definitions."""

    methods: frozenset[str]
    speculative_keys: frozenset[str]
    engine_keys: frozenset[str]
    dtypes: frozenset[str]
    load_formats: frozenset[str]
    quantizations: frozenset[str]


def vllm_vocabulary() -> VllmVocabulary:
    """Import vLLM's config modules (no model, no device) and collect accepted names.

    Imported here, before vLLM configures its logging, vLLM's platform notes ("Triton
    is installed, but ...") would reach stderr through Python's last-resort handler;
    they say nothing about a plan, so a null handler takes them during the import.
    """
    quiet = logging.NullHandler()
    logging.getLogger("vllm").addHandler(quiet)
    try:
        from vllm.config import model as model_config
        from vllm.config import speculative
        from vllm.engine.arg_utils import EngineArgs
        from vllm.model_executor.layers.quantization import QUANTIZATION_METHODS
        from vllm.model_executor.model_loader import LoadFormats
    finally:
        logging.getLogger("vllm").removeHandler(quiet)

    return VllmVocabulary(
        methods=frozenset(typing.get_args(speculative.SpeculativeMethod)),
        speculative_keys=frozenset(
            f.name for f in dataclasses.fields(speculative.SpeculativeConfig)
        ),
        engine_keys=frozenset(f.name for f in dataclasses.fields(EngineArgs)),
        dtypes=frozenset(typing.get_args(model_config.ModelDType)),
        load_formats=frozenset(typing.get_args(LoadFormats)),
        quantizations=frozenset(QUANTIZATION_METHODS),
    )


def check_plan(plan: Plan, vocab: VllmVocabulary) -> list[str]:
    """Every problem of ``plan`` against ``vocab``, one line each (empty: all accepted)."""
    problems: list[str] = []
    for method in plan.methods:
        where = f"[[method]] {method.name!r}"
        if method.method != BASELINE and method.method not in vocab.methods:
            problems.append(
                f"{where}.method: vLLM has no speculative method {method.method!r}"
                f" (known: {', '.join(sorted(vocab.methods))})"
            )
        for key in sorted(set(method.options) - vocab.speculative_keys):
            problems.append(f"{where}.options.{key}: not a field of vLLM's SpeculativeConfig")
        for key in sorted(set(method.engine) - vocab.engine_keys):
            problems.append(f"{where}.engine.{key}: not an argument of vLLM's EngineArgs")
    for model in plan.models:
        where = f"[[model]] {model.name!r}"
        if model.dtype not in vocab.dtypes:
            problems.append(f"{where}.dtype: vLLM accepts {', '.join(sorted(vocab.dtypes))}")
        if model.load_format not in vocab.load_formats:
            problems.append(f"{where}.load_format: vLLM has no load format {model.load_format!r}")
        if model.quantization is not None and model.quantization not in vocab.quantizations:
            problems.append(f"{where}.quantization: vLLM has no method {model.quantization!r}")
        for key in sorted(set(model.engine) - vocab.engine_keys):
            problems.append(f"{where}.engine.{key}: not an argument of vLLM's EngineArgs")
    return problems
