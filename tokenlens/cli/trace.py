"""``tokenlens trace``: one traced generation run -> a run directory.

Contract: :func:`register` adds the parser (its options in :func:`add_options`), and
:func:`run` builds a :class:`~tokenlens.trace.TraceConfig` and calls ``run_trace``, or
``resume_trace`` for ``--resume RUN``, which takes no other option.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from tokenlens.cli.common import (
    add_progress_flag,
    corpus_file,
    formatter,
    int_in,
    number_in,
    positive_int,
    progress_for,
    say,
    typed_option,
)
from tokenlens.engine.config import SamplingConfig
from tokenlens.engine.options import parse_engine_options
from tokenlens.engine.runner import Engine
from tokenlens.engine.server import METADATA_TIMEOUT, TOKEN_TIMEOUT, ServerTimeouts
from tokenlens.errors import TokenlensError
from tokenlens.models.tiny import TINY_NAMES
from tokenlens.trace import BASELINE, DEFAULT_CONCURRENCY, TraceConfig, resume_trace, run_trace

# vLLM 0.32's load formats (vllm.model_executor.model_loader.LoadFormats), copied because
# the CLI process never imports vLLM.
LOAD_FORMATS = (
    "auto",
    "hf",
    "dummy",
    "fastsafetensors",
    "instanttensor",
    "ipc_cache",
    "mistral",
    "modelexpress",
    "npcache",
    "pt",
    "runai_streamer",
    "runai_streamer_sharded",
    "safetensors",
    "sharded_state",
    "tensorizer",
)

HELP = """\
Generate every prompt of a JSONL prompt file with vLLM and write a run directory:
manifest.json (signature + provenance), requests.parquet (outputs, token ids, the
target's top-k logprobs), metrics.json (vLLM's own spec-decode counters).

Without --model the embedded Qwen2.5-Coder-1.5B-Instruct target is used (assembled
offline on first use); --method draft_model without --draft-model uses the embedded
0.5B drafter. Decoding is greedy unless --temperature is given.

examples:
  tokenlens trace --prompts corpora/demo.jsonl --method draft_model --k 3 --out runs/dm3
  tokenlens trace --prompts corpora/demo.jsonl --method ngram --k 3 --out runs/ng3
  tokenlens trace --prompts corpora/demo.jsonl --out runs/baseline          (no speculation)
  tokenlens trace --prompts p.jsonl --model Qwen/Qwen3.5-4B --method mtp --out runs/mtp3
  tokenlens trace --prompts p.jsonl --model tiny-mimo-mtp --method mtp --k 2 \\
      --load-format dummy --out runs/tiny-mtp      (code path only: random weights)
  tokenlens trace --prompts p.jsonl --model tiny-qwen3 --method dflash \\
      --draft-model tiny-qwen3-dflash --load-format dummy --out runs/tiny-dflash
  tokenlens trace --prompts p.jsonl --model Qwen/Qwen3.5-4B --method mtp --k 3 \\
      --engine-option quantization=fp8 --engine-option max_num_seqs=16 --out runs/mtp-fp8
  TOKENLENS_TRACE_DIR=/traces vllm serve ... &     (a server with the plugin enabled)
  tokenlens trace --prompts p.jsonl --server http://127.0.0.1:8000 --server-trace-dir /traces \\
      --method draft_model --k 3 --out runs/served
  tokenlens trace --resume runs/dm3      (complete a partial run: only the missing prompts)

Every prompt is measured with the target's tokenizer and chat template before the
engine starts; one longer than --max-model-len minus its max_tokens is refused by name.

If the trace is killed, interrupted (Ctrl-C) or the engine dies, the run directory
stays `partial` and holds every finished request and the plugin's step files; the
error line names the command that continues it. `--resume RUN` keeps the finished
requests with their events, generates only the missing prompts with the run's own
settings (from its manifest), and reconciles the new part exactly with the new
engine's counters (docs/formats.md says what is and is not reconciled). A run
directory is locked while it is written: a second trace into it is refused.
--method, --spec-option keys and the models are checked before anything starts
(docs/errors.md).
"""


# vLLM's default max_logprobs: a request asking for more is refused once the engine runs.
MAX_LOGPROBS = 20
# What --resume may be given with (every other option's setting comes from the manifest).
RESUME_MAY_COMBINE = {"resume", "quiet", "handler", "command"}


def register(sub: Any) -> None:
    p = sub.add_parser(
        "trace",
        help="run prompts through vLLM with a speculative method and record the run",
        description=HELP,
        formatter_class=formatter(),
    )
    add_options(p)
    p.set_defaults(handler=run)


def add_options(p: argparse.ArgumentParser) -> None:
    """Every option of ``trace`` (also what :func:`resume` compares a --resume's with)."""
    p.add_argument(
        "--prompts",
        type=corpus_file,
        help="prompt file (JSONL) or a shipped corpus name (demo, policy, ...); required",
    )
    p.add_argument("--out", type=Path, help="run directory to create; required")
    p.add_argument(
        "--resume",
        type=Path,
        metavar="RUN",
        help="complete the partial run RUN with its own settings (no other options)",
    )
    p.add_argument(
        "--model",
        help="target model: path, hub id, 'target' (default: embedded 1.5B), or a tiny "
        "weightless model (with --load-format dummy)",
    )
    p.add_argument(
        "--tokenizer",
        help="tokenizer for analysis: path, hub id, or built-in 'qwen2.5'/'qwen3.5' "
        "(default: the model's)",
    )
    p.add_argument(
        "--method",
        default=BASELINE,
        help="speculative method as vLLM names it: ngram, draft_model, mtp, dflash, eagle, "
        "eagle3, suffix, ... or 'none' for no speculation (default: none)",
    )
    p.add_argument(
        "--draft-model", help="drafter for draft_model/eagle/dflash (default: embedded 0.5B)"
    )
    p.add_argument(
        "--k",
        "--num-spec",  # deprecated alias: k is the name everywhere a user sees it
        dest="k",
        type=positive_int,
        default=3,
        metavar="K",
        help="draft tokens per step, k (default: 3; --num-spec is a deprecated alias)",
    )
    p.add_argument(
        "--spec-option",
        action="append",
        default=[],
        metavar="KEY=JSON",
        help="extra speculative_config key, e.g. prompt_lookup_max=5 (repeatable)",
    )
    p.add_argument(
        "--max-tokens",
        type=positive_int,
        default=256,
        help="per prompt unless the prompt sets max_tokens",
    )
    p.add_argument(
        "--cap-tokens", type=positive_int, help="upper bound on every prompt's max_tokens"
    )
    p.add_argument(
        "--allow-capped-output",
        action="store_true",
        help="trace prompts too long to reach their max_tokens within --max-model-len "
        "(vLLM stops their output there; one warning names them) instead of refusing them",
    )
    p.add_argument("--temperature", type=number_in(0.0), default=0.0, help="0 = greedy (default)")
    p.add_argument("--top-p", type=number_in(0.0, 1.0, low_open=True), default=1.0, help="(0, 1]")
    p.add_argument("--seed", type=int_in(0), default=0)
    p.add_argument(
        "--logprobs",
        type=int_in(0, MAX_LOGPROBS),
        default=10,
        help=f"top-k logprobs per emitted token (default: 10, 0 = off, at most {MAX_LOGPROBS}: "
        "vLLM's max_logprobs)",
    )
    p.add_argument(
        "--concurrency",
        type=positive_int,
        default=DEFAULT_CONCURRENCY,
        help=f"requests in flight (default: {DEFAULT_CONCURRENCY}; batching is cheap on CPU)",
    )
    p.add_argument("--lang", action="append", help="only prompts of this language (repeatable)")
    p.add_argument("--limit", type=positive_int, help="at most N prompts per language")
    p.add_argument("--max-model-len", type=positive_int, default=4096)
    p.add_argument("--dtype", default="auto", help="vLLM dtype (default: auto)")
    p.add_argument(
        "--load-format",
        choices=LOAD_FORMATS,
        default="auto",
        metavar="FORMAT",
        help="how vLLM loads the weights, as vLLM names it: auto (default), safetensors, pt, "
        "dummy, ... 'dummy' uses random weights: "
        "acceptance and outputs are meaningless; it exists to test code paths, e.g. with "
        f"the weightless tiny models ({', '.join(TINY_NAMES)})",
    )
    p.add_argument(
        "--no-chat", action="store_true", help="send 'text' prompts raw, without the chat template"
    )
    p.add_argument(
        "--no-async-scheduling",
        action="store_true",
        help="turn off vLLM's async scheduling (vLLM decides per release, platform, runner "
        "and method; the manifest records what the engine resolved, `doctor` shows it per "
        "method): keeps rejected drafts' token ids, at some speed (docs/capture.md)",
    )
    p.add_argument(
        "--engine-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a vLLM engine argument for the engine tokenlens starts, e.g. quantization=fp8, "
        "tensor_parallel_size=2, gpu_memory_utilization=0.85, max_num_seqs=64, "
        "compilation_config='{\"level\": 0}' (VALUE is JSON or a string; repeatable; "
        "checked against the installed vLLM's EngineArgs before it starts; recorded in "
        "the manifest and the signature)",
    )
    p.add_argument(
        "--server",
        metavar="URL",
        help="send the prompts to a running `vllm serve` (started with TOKENLENS_TRACE_DIR set) "
        "instead of starting an engine; --method/--k then only describe the server",
    )
    p.add_argument(
        "--server-trace-dir",
        type=Path,
        help="with --server: the server's TOKENLENS_TRACE_DIR as seen from here (a mounted volume)",
    )
    p.add_argument(
        "--server-timeout",
        type=number_in(0.0, low_open=True),
        default=METADATA_TIMEOUT,
        metavar="S",
        help="with --server: seconds the server has to answer /v1/models, /version, /metrics "
        f"(default: {METADATA_TIMEOUT:g})",
    )
    p.add_argument(
        "--token-timeout",
        type=number_in(0.0, low_open=True),
        default=TOKEN_TIMEOUT,
        metavar="S",
        help="with --server: seconds a generation may go without a token, the first one "
        f"(queueing and prefill) included (default: {TOKEN_TIMEOUT:g})",
    )
    p.add_argument("--cache", type=Path, help="embedded model cache directory")
    p.add_argument("--overwrite", action="store_true", help="replace an existing run directory")
    add_progress_flag(p)


def parse_options(items: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise TokenlensError(f"--spec-option expects KEY=VALUE, got {item!r}")
        try:
            out[key] = json.loads(value)
        except ValueError:
            out[key] = value
    return out


def resume(args: argparse.Namespace) -> int:
    options = argparse.ArgumentParser(add_help=False)
    add_options(options)  # every option's default, and its names as the user may type them
    defaults = vars(options.parse_args([]))
    names = {a.dest: list(a.option_strings) for a in options._actions if a.option_strings}
    extra = sorted(
        key
        for key, value in vars(args).items()
        if key not in RESUME_MAY_COMBINE and key in defaults and value != defaults[key]
    )
    if extra:
        typed = getattr(args, "argv_typed", [])
        flags = [
            typed_option(typed, names.get(key, ["--" + key.replace("_", "-")])) for key in extra
        ]
        raise TokenlensError(
            f"--resume takes every setting from the run's manifest: drop {', '.join(flags)}"
        )
    progress = progress_for(args)
    out = resume_trace(args.resume, progress, args.start or Engine)
    progress.close()
    say(f"run completed in {out}")
    return 0


def run(args: argparse.Namespace) -> int:
    if args.resume is not None:
        return resume(args)
    for flag, value in (("--prompts", args.prompts), ("--out", args.out)):
        if value is None:
            raise TokenlensError(f"the following arguments are required: {flag}")
    config = TraceConfig(
        prompts=args.prompts,
        out=args.out,
        model=args.model,
        tokenizer=args.tokenizer,
        method=args.method,
        draft_model=args.draft_model,
        k=args.k,
        spec_options=parse_options(args.spec_option),
        sampling=SamplingConfig(
            max_tokens=args.max_tokens,
            temperature=args.temperature,
            top_p=args.top_p,
            seed=args.seed,
            logprobs=args.logprobs or None,
        ),
        concurrency=args.concurrency,
        max_model_len=args.max_model_len,
        dtype=args.dtype,
        load_format=args.load_format,
        langs=tuple(args.lang) if args.lang else None,
        limit=args.limit,
        cap_tokens=args.cap_tokens,
        allow_capped_output=args.allow_capped_output,
        overwrite=args.overwrite,
        chat=not args.no_chat,
        cache=args.cache,
        server=args.server,
        server_trace_dir=args.server_trace_dir,
        engine_options=parse_engine_options(args.engine_option),
        server_timeouts=ServerTimeouts(args.server_timeout, args.token_timeout),
        engine_extra={"async_scheduling": False} if args.no_async_scheduling else {},
        argv=tuple(["tokenlens", *sys.argv[1:]]),
    )
    progress = progress_for(args)
    out = run_trace(config, progress, args.start or Engine)
    progress.close()
    say(f"run written to {out}")
    return 0
