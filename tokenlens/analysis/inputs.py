"""Everything ``analyze`` checks before it does any work, so that it is never silently wrong.

A result of tokenlens is a scientific claim; an input that would make it wrong must
stop the analysis with one line that names the run, the request and the reason,
*before* minutes of classification and bootstrap. :func:`validate_inputs` checks:

- ``--out``: not a file, not one of the runs, and not a directory holding files that
  analyze did not write (unless ``--overwrite``); analyze marks its output directories
  with :data:`OUT_MARKER`.
- Each run is readable, its manifest fields have the right types, and its events fit
  its requests (no nulls where the contract has none, positions within k, accepted
  drafts a prefix of each step, output indices inside the output).
- Token ids decode to ``output_text`` with the run's tokenizer (``--tokenizer``
  overrides it for every run), so a wrong or relabelled tokenizer is caught, as is an
  edited text. Runs with different tokenizers need ``--tokenizer``, under which every
  run's ids must decode.
- No run is given twice: not the same directory, and not two directories with the
  same content (a copy would double n and narrow every interval). Content is compared
  as sets of rows, sorted before hashing, so a resumed copy, a replay equal to its
  trace and an independent identical trace are all caught, whatever their row order.
- Runs that differ in something the analysis groups on but does not model (the target
  model, the weights, the decoding, the quantization: :data:`POOLING_FIELDS`) are not
  pooled: refused in one line naming both values, unless ``--compare FIELD`` asks for
  them to be analysed apart (:func:`pooling_groups`). Within what is pooled, one prompt
  id must name one prompt (the same prompt token ids wherever they are recorded).
- A ``partial`` run needs ``--allow-partial``; events that do not match the run's
  counters need ``--allow-unreconciled``. Analysed anyway, they are named in
  :attr:`CheckedInputs.warnings`, which go into ``summary.json`` as
  ``inputs.warnings`` (one line each) for the report and FINDINGS to show at the top.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokenlens import __version__
from tokenlens.analysis.config import AnalyzeConfig
from tokenlens.analysis.damage import damage_report
from tokenlens.analysis.memory import give_back_memory
from tokenlens.analysis.overlap import resolve_overlap
from tokenlens.analysis.reread import Snapshot
from tokenlens.analysis.run_facts import Options, RunFacts, read_facts
from tokenlens.errors import TokenlensError
from tokenlens.rundir import (
    Run,
    now_iso,
    write_json_atomic,
)
from tokenlens.signature import parse_signature

OUT_MARKER = ".tokenlens-analyze.json"
"""Written into every analyze output directory: analyze may write there again."""

# What analyze writes (a directory holding only these is an earlier analyze output).
ANALYZE_OUTPUTS = frozenset(
    {
        "tokens.parquet",
        "outputs.parquet",
        "summary.json",
        "tables.md",
        "report.html",
        "FINDINGS.md",  # the CLI's, with report.html
        "charts",
        OUT_MARKER,
    }
)


def _decoding(manifest: dict[str, Any]) -> str:
    """``greedy``, or the sampling settings that change what is generated."""
    sampling = manifest.get("sampling")
    sampling = sampling if isinstance(sampling, dict) else {}
    temperature = sampling.get("temperature") or 0
    if temperature == 0:
        return "greedy"
    top_p = sampling.get("top_p")
    top_k = sampling.get("top_k")
    return f"t{temperature:g},p{1.0 if top_p is None else top_p:g},k{top_k or 0}"


POOLING_FIELDS: dict[str, tuple[str, Callable[[dict[str, Any]], str]]] = {
    "model": ("target model", lambda m: str(m.get("model"))),
    "weights": ("weights", lambda m: str(m.get("load_format") or "auto")),
    "decoding": ("decoding", _decoding),
    "quantization": (
        "quantization",
        lambda m: parse_signature(str(m.get("signature", ""))).get("quant", "none"),
    ),
}
"""What the analysis groups runs on without modelling it: runs that differ in one are
two studies, never pooled (``--compare FIELD`` analyses them apart). Drafter, method
and k are not here: the analysis keeps them apart itself (families, runs)."""


@dataclass(frozen=True)
class PoolGroup:
    """Runs that may be pooled: equal in every pooling field (``values``: the compared ones)."""

    label: str
    values: dict[str, str]
    paths: tuple[Path, ...]


@dataclass(frozen=True)
class CheckedInputs:
    """The runs that passed every check, and what was let through by an --allow flag."""

    runs: tuple[Run, ...]
    tokenizers: tuple[str, ...]  # per run: the tokenizer its ids were checked with
    warnings: tuple[str, ...]  # analysed despite: partial, unreconciled (one line each)
    notes: tuple[str, ...]  # worth knowing, not a defect: resumed runs
    groups: tuple[PoolGroup, ...] = ()  # with --compare: the runs of each analysis
    damage: dict[str, Any] = dataclasses.field(
        default_factory=dict
    )  # summary.json → inputs (damage.py)
    snapshots: tuple[Snapshot, ...] = ()  # per run: to read it again at its join (reread.py)

    def section(self) -> dict[str, Any]:
        """``summary.json`` → ``inputs``: what was checked and what to say at the top."""
        return {
            "warnings": list(self.warnings),
            "notes": list(self.notes),
            **self.damage,
            "runs": [
                {
                    "path": str(run.path),
                    "status": run.manifest["status"],
                    "tokenizer": tokenizer,
                    "resumed": bool(run.manifest.get("resumed")),
                }
                for run, tokenizer in zip(self.runs, self.tokenizers, strict=True)
            ],
        }


def validate_inputs(config: AnalyzeConfig, compare: tuple[str, ...] = ()) -> CheckedInputs:
    """Check every input of ``config``; the first problem raises a one-line TokenlensError.

    ``compare`` names pooling fields in which the runs may differ (each combination is
    then one :class:`PoolGroup`, analysed apart); in every other one they must agree.
    On success the output directory exists and carries :data:`OUT_MARKER`.
    """
    if not config.runs:
        raise TokenlensError("analyze needs at least one run directory")
    check_out(config.out, config.runs, config.overwrite)
    _no_same_directory(config.runs)
    if config.bench is not None and not config.bench.exists():
        raise TokenlensError(f"--bench {config.bench}: no such file or directory")
    # One run's tables at a time (run_facts.py): each run's own checks run as it is read,
    # their refusals held until their turn below; the comparisons read small facts.
    options = Options(config.tokenizer, config.allow_partial, config.allow_unreconciled)
    facts = []
    for path in config.runs:
        facts.append(read_facts(path, options))
        give_back_memory()  # the run's tables and the checks' transients, freed
    for f in facts:
        f.structure.get()  # its manifest and events
    _no_same_content(facts)
    groups = pooling_groups([f.run for f in facts], compare)
    for group in groups:
        _same_prompts([f for f in facts if f.path in group.paths])
    _check_tokens(facts, config.tokenizer)
    warnings, notes = [], []
    for f in facts:
        for held in (f.partial, f.unreconciled):
            line = held.get()
            if line:
                warnings.append(line)
        run = f.run
        resumed = run.manifest.get("resumed")
        if isinstance(resumed, list) and resumed and run.complete:
            salvaged = sum(
                r["salvaged_requests"]
                for r in resumed
                if isinstance(r, dict) and isinstance(r.get("salvaged_requests"), int)
            )
            notes.append(
                f"{run.path}: resumed after a crash; {salvaged} requests were salvaged from "
                "step files (their counters are not vLLM's), the rest reconciled with vLLM"
            )
    # Damage (non-finite confidences, contradicted language labels), then requests that
    # two runs share: each output token counts once (docs/errors.md).
    damaged, damage = damage_report(
        [(f.path, f.contradicted, f.nonfinite) for f in facts], config.strict
    )
    warnings += damaged
    kept: dict[Path, RunFacts] = {}
    for group in groups:
        members, dropped = resolve_overlap(
            [f for f in facts if f.path in group.paths], config.overlap
        )
        kept.update((f.path, f) for f in members)
        warnings += dropped
    facts = [kept[f.path] for f in facts if f.path in kept]
    claim_out(config.out)
    return CheckedInputs(
        tuple(f.run for f in facts),
        tuple(f.tokenizer for f in facts),
        tuple(warnings),
        tuple(notes),
        tuple(groups),
        damage,
        tuple(f.snapshot for f in facts),
    )


# -- --out ---------------------------------------------------------------------------------


def check_out(out: Path, runs: tuple[Path, ...], overwrite: bool) -> None:
    """``--out`` must be a directory analyze may write into."""
    if out.exists() and not out.is_dir():
        raise TokenlensError(f"--out {out} is a file: give a directory")
    target = out.resolve()
    for run in runs:
        if run.exists() and run.resolve() == target:
            raise TokenlensError(f"--out {out} is the run directory {run}: give another")
    if not out.is_dir() or overwrite:
        return
    try:
        names = sorted(p.name for p in out.iterdir())
    except OSError as exc:
        raise TokenlensError(f"--out {out}: cannot list it ({exc.strerror or exc})") from None
    if not names or OUT_MARKER in names or _earlier_output(out, names):
        return
    foreign = [n for n in names if n not in ANALYZE_OUTPUTS] or names
    raise TokenlensError(
        f"--out {out} holds files analyze did not write ({foreign[0]}"
        f"{f' and {len(foreign) - 1} more' if len(foreign) > 1 else ''}); "
        "give --overwrite to write into it anyway"
    )


def _earlier_output(out: Path, names: list[str]) -> bool:
    """A directory written by an analyze older than :data:`OUT_MARKER`."""
    if not set(names) <= ANALYZE_OUTPUTS or "summary.json" not in names:
        return False
    try:
        summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(summary, dict) and "hypotheses" in summary and "acceptance" in summary


def claim_out(out: Path) -> None:
    """Create ``out`` and mark it as analyze's (after every check passed)."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        write_json_atomic(
            out / OUT_MARKER,
            {"written_by": "tokenlens analyze", "tokenlens": __version__, "at": now_iso()},
        )
    except OSError as exc:
        raise TokenlensError(f"--out {out}: cannot write there ({exc.strerror or exc})") from None


# -- duplicates ----------------------------------------------------------------------------


def _no_same_directory(paths: tuple[Path, ...]) -> None:
    seen: dict[Path, Path] = {}
    for path in paths:
        key = path.resolve()
        if key in seen:
            same = "" if str(seen[key]) == str(path) else f" (as {seen[key]})"
            raise TokenlensError(f"run directory {path} is given twice{same}: each run counts once")
        seen[key] = path


def _no_same_content(facts: list[RunFacts]) -> None:
    """Two directories with the same requests and events are one run counted twice."""
    seen: dict[bytes, Run] = {}
    for f in facts:
        run, key = f.run, f.content
        if key in seen:
            other = seen[key]
            same = run.manifest["signature"] == other.manifest["signature"]
            replay = any(
                a.manifest.get("replayed_from") == b.manifest["signature"]
                for a, b in ((run, other), (other, run))
            )
            why = " (one is a replay of the other)" if replay else " and signature" if same else ""
            raise TokenlensError(
                f"runs {other.path} and {run.path} hold the same requests and events"
                f"{why}: one run would count twice"
            )
        seen[key] = run


# -- what may be pooled -----------------------------------------------------------------


def _label(values: dict[str, str]) -> str:
    """A directory name for a group: its compared values, path-safe."""
    text = "_".join(values.values()) or "all"
    return re.sub(r"[^A-Za-z0-9._@+-]+", "-", text).strip("-.") or "group"


def pooling_groups(runs: list[Run], compare: tuple[str, ...] = ()) -> list[PoolGroup]:
    """The runs split by the ``compare`` fields; every other pooling field must agree.

    Without ``compare`` this is one group, or a one-line refusal naming the first field
    the runs differ in, with the two values and the option that keeps them apart.
    """
    unknown = [f for f in compare if f not in POOLING_FIELDS]
    if unknown:
        raise TokenlensError(f"--compare {unknown[0]}: choose from {', '.join(POOLING_FIELDS)}")
    for field, (name, value_of) in POOLING_FIELDS.items():
        if field in compare:
            continue
        first = runs[0]
        for run in runs[1:]:
            a, b = value_of(first.manifest), value_of(run.manifest)
            if a != b:
                raise TokenlensError(
                    f"the runs differ in their {name} ({first.path}: {a}; {run.path}: {b}), "
                    "which the analysis does not model: pooled, they would be one study "
                    f"mixing two; analyse them apart, or give --compare {field} to analyse "
                    "each apart, side by side"
                )
    groups: dict[tuple[str, ...], list[Run]] = {}
    for run in runs:
        key = tuple(POOLING_FIELDS[f][1](run.manifest) for f in compare)
        groups.setdefault(key, []).append(run)
    out: list[PoolGroup] = []
    labels: set[str] = set()
    for key, members in groups.items():
        values = dict(zip(compare, key, strict=True))
        label = _label(values)
        while label in labels:
            label += "+"
        labels.add(label)
        out.append(PoolGroup(label, values, tuple(r.path for r in members)))
    return out


def _same_prompts(facts: list[RunFacts]) -> None:
    """One prompt id, one prompt: the analysis clusters on prompt ids across runs."""
    seen: dict[str, tuple[bytes, Path]] = {}
    for f in facts:
        for pid, tokens in zip(f.prompt_ids, f.prompts, strict=True):
            if tokens is None:
                continue  # not recorded (older runs): nothing to compare
            if pid in seen and seen[pid][0] != tokens:
                raise TokenlensError(
                    f"prompt {pid!r} is a different prompt in {seen[pid][1]} and {f.path} "
                    "(its prompt token ids differ): the analysis treats one prompt id as one "
                    "prompt; give the prompts distinct ids, or analyse the runs apart"
                )
            seen.setdefault(pid, (tokens, f.path))


# -- tokens ------------------------------------------------------------------------------


def _check_tokens(facts: list[RunFacts], override: str | None) -> None:
    """Every run's tokenizer loads, the runs share one (or ``--tokenizer`` names it), and
    every request's ids decode to its text with it (checked as each run was read)."""
    for f in facts:
        f.vocabulary.get()
    identities = {f.vocabulary.value for f in facts}
    if override is None and len(identities) > 1:
        listed = ", ".join(f"{f.path.name}: {f.tokenizer}" for f in facts)
        raise TokenlensError(
            f"the runs use different tokenizers ({listed}); give --tokenizer T if one "
            "tokenizer fits them all (every run's ids must decode under it)"
        )
    for f in facts:
        f.decodes.get()
