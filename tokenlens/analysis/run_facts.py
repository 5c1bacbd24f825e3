"""What the input checks keep of a run once its tables are let go (one run read at a time).

:func:`read_facts` reads one run, runs every check of that run alone on its tables
(manifest and events, ids decoding to the text, whole and reconciled, damage) and
keeps what the checks that compare runs need, per request and small: the run's
content key, its request and prompt ids, a digest of each prompt's token ids, its
output lengths. The tables are then let go, so the input checks hold one run's tables
at a time however many runs a study has (they held every run's at once: 158 bytes per
event in the bench's study, twice the figures' frame).

A check's refusal is held (:class:`Held`), not raised, until
:func:`tokenlens.analysis.inputs.validate_inputs` reaches it in its documented order
(every run read; each run's manifest and events; the comparisons between runs; the
tokens; whole and reconciled; damage; shared requests): a study with two faults is
refused for the same one as when every run was held at once.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tokenlens.analysis.content import content_key
from tokenlens.analysis.damage import exclude_nonfinite, label_contradictions
from tokenlens.analysis.reread import Snapshot, stamp, without_tables
from tokenlens.analysis.run_checks import (
    check_events,
    check_manifest,
    partial_warning,
    unreconciled_warning,
)
from tokenlens.errors import TokenlensError
from tokenlens.rundir import Run, read_run
from tokenlens.text.detokenize import output_mismatch

T = TypeVar("T")


@dataclass(frozen=True)
class Held(Generic[T]):
    """A check's result, or its refusal, kept until the checks' order reaches it."""

    value: T | None = None
    error: TokenlensError | None = None

    def get(self) -> T | None:
        """The result; the refusal is raised here."""
        if self.error is not None:
            raise self.error
        return self.value


def hold(check: Callable[[], T]) -> Held[T]:
    """``check()``'s result, or the one-line refusal it raised (without its traceback,
    whose frames would hold the run's tables until the refusal is raised)."""
    try:
        return Held(check())
    except TokenlensError as exc:
        exc.__context__ = exc.__cause__ = None  # nor the exceptions it replaced
        return Held(error=exc.with_traceback(None))


@dataclass(frozen=True)
class Options:
    """The options the checks of one run read."""

    tokenizer: str | None  # --tokenizer (None: each run's manifest's)
    allow_partial: bool
    allow_unreconciled: bool


@dataclass(frozen=True)
class RunFacts:
    """One run as the input checks keep it: no tables (``run`` holds the manifest, the
    counters and the path), its checks' held results, and per request what the checks
    between runs compare."""

    run: Run
    snapshot: Snapshot  # to read it again at its join (reread.py)
    structure: Held[None]  # its manifest and events (run_checks.py)
    content: bytes = b""  # content.content_key
    request_ids: tuple[str, ...] = ()
    prompt_ids: tuple[str, ...] = ()
    prompts: tuple[bytes | None, ...] = ()  # digest of the prompt token ids (None: not recorded)
    output_lengths: tuple[int, ...] = ()
    tokenizer: str = ""  # the tokenizer its ids are checked with
    vocabulary: Held[str] = Held()  # the tokenizer's identity, or why it did not load
    decodes: Held[None] = Held()  # its ids decode to its text
    partial: Held[str | None] = Held()  # run_checks.partial_warning (None: whole)
    unreconciled: Held[str | None] = Held()  # run_checks.unreconciled_warning
    contradicted: tuple[str, ...] = ()  # damage.label_contradictions
    nonfinite: dict[str, int] | None = None  # damage.exclude_nonfinite's counts

    @property
    def path(self) -> Path:
        return self.run.path


def read_facts(path: Path, options: Options) -> RunFacts:
    """Read the run at ``path`` (a read error is raised at once), check it alone, and
    keep what the other checks need; its tables are not kept."""
    files = stamp(path)  # before reading: a change while it is read is caught at the join
    run = read_run(path)
    events = run.events.num_rows if run.events is not None else 0
    snap = Snapshot(path, files, run.requests.num_rows, events, None)
    bare = without_tables(run)
    structure = hold(lambda: _structure(run))
    if structure.error is not None:
        return RunFacts(bare, snap, structure)
    requests = run.requests
    name = options.tokenizer or str(run.manifest["tokenizer"])
    vocab: Any = None
    try:
        vocab = _load(name)
        vocabulary: Held[str] = Held(str(vocab.identity))
    except TokenlensError as exc:
        vocabulary = Held(error=TokenlensError(f"{path}: {exc}"))  # a new one: no frames
    return RunFacts(
        run=bare,
        snapshot=snap,
        structure=structure,
        content=content_key(run),
        request_ids=tuple(str(x) for x in requests.column("request_id").to_pylist()),
        prompt_ids=tuple(str(x) for x in requests.column("prompt_id").to_pylist()),
        prompts=prompt_digests(requests.column("prompt_token_ids")),
        output_lengths=tuple(
            pc.list_value_length(requests.column("output_token_ids")).fill_null(0).to_pylist()
        ),
        tokenizer=name,
        vocabulary=vocabulary,
        decodes=hold(lambda: _decodes(run, name, vocab, options.tokenizer))
        if vocab is not None
        else Held(),
        partial=hold(lambda: partial_warning(run, options.allow_partial)),
        unreconciled=hold(lambda: unreconciled_warning(run, options.allow_unreconciled)),
        contradicted=tuple(label_contradictions(run, vocab)) if vocab is not None else (),
        nonfinite=exclude_nonfinite(run)[1],
    )


def _structure(run: Run) -> None:
    check_manifest(run)
    check_events(run)


def _load(name: str) -> Any:
    from tokenlens.text import load_tokenizer

    return load_tokenizer(name)


def _decodes(run: Run, name: str, vocab: Any, override: str | None) -> None:
    """Every request's ids decode to its text with ``vocab`` (one line naming the first
    request that does not)."""
    rows = zip(
        run.requests.column("request_id").to_pylist(),
        run.requests.column("output_token_ids").to_pylist(),
        run.requests.column("output_text").to_pylist(),
        strict=True,
    )
    for rid, ids, text in rows:
        why = output_mismatch(vocab, ids or [], text or "")
        if why is not None:
            source = "--tokenizer" if override else "the manifest's tokenizer"
            raise TokenlensError(
                f"{run.path}: request {rid!r}: output_token_ids do not decode to "
                f"output_text with {name} ({source}): {why}"
            )


def prompt_digests(column: pa.ChunkedArray) -> tuple[bytes | None, ...]:
    """Per request, a digest of its prompt token ids (equal ids, equal digest), None
    where they were not recorded: what two runs compare of a prompt, without holding
    its ids."""
    lists = column.combine_chunks()
    lengths = pc.list_value_length(lists).fill_null(0).to_numpy()
    flat = pc.list_flatten(lists).to_numpy(zero_copy_only=False).astype(np.int64)
    ends = np.cumsum(lengths)
    missing = lists.is_null().to_numpy(zero_copy_only=False)
    out: list[bytes | None] = []
    for i, end in enumerate(ends.tolist()):
        if missing[i]:
            out.append(None)
            continue
        ids = flat[end - int(lengths[i]) : end]
        out.append(hashlib.blake2b(ids.tobytes(), digest_size=16).digest())
    return tuple(out)
