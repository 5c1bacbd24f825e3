"""The join in chunks of whole requests, and the files it writes as it goes.

:func:`join_parts` then :func:`assemble` give, for one run, exactly the frame
:func:`join_run` gives for the whole run (values, dtypes, category order and row
order: the bootstrap draws the same pairs and every figure ends in the same digit),
and for several runs their frames concatenated, but classify, look up confidences and
classify rejections one chunk of whole requests at a time
(:func:`~tokenlens.analysis.chunks.chunk_bounds`).
Every rule of the join stays in :mod:`tokenlens.analysis.join`: a chunk is a smaller
run handed to the same function, and each of its per-token steps reads only the
chunk's own requests.

What a chunk needs in memory is bounded by :data:`CHUNK_EVENTS` (the per-token
classes, the top-k logprobs flattened for the draft lookup, the rejection
classification); what outlives it is the chunk's figure columns, fixed-width codes (one
categorical code, int, float or flag per column), which :func:`assemble` turns into
the study's frame one column at a time. Each chunk
also goes to :class:`TableSink` (``tokens.parquet``, ``outputs.parquet``) at once,
so neither file is assembled in memory. ``tokens.parquet`` therefore holds its rows
chunk by chunk: the rows of a run grouped by chunks of requests, each chunk in event
order (the same rows and columns as one frame would write).
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from tokenlens.analysis.chunks import joined_chunks
from tokenlens.analysis.join import CLASS_COLUMNS
from tokenlens.analysis.memory import give_back_memory
from tokenlens.arrays import I64
from tokenlens.errors import TokenlensError
from tokenlens.rundir import Run
from tokenlens.text import Vocabulary

CHUNK_EVENTS = 50_000
"""A chunk is the fewest whole requests (in request order) with at least this many
events; one request longer than that is a chunk of its own."""

# Categoricals whose categories follow the order in which their labels first occur in
# the run's rows (pyarrow's dictionary_encode in join_run); every other categorical
# keeps categories in request order (request_id, prompt_id, lang, pair) or fixed ones
# (buckets, rejection kinds), which chunks in request order give as they are.
_FIRST_SEEN = frozenset(CLASS_COLUMNS)


Render = Callable[[Run, pd.DataFrame], tuple[pa.Table, ...]]
"""A chunk's sub-run and joined frame -> the tables the files receive (in the process
that joined it)."""


def _chunks(
    run: Run,
    label: str,
    vocab: Vocabulary,
    render: Render | None,
    write: Callable[[tuple[pa.Table, ...]], None] | None,
    events: int | None,
    drop: Sequence[str],
    jobs: int | None,
) -> Iterator[tuple[pd.DataFrame, I64]]:
    """Each chunk's joined frame (of ``events``, by default :data:`CHUNK_EVENTS`;
    compacted without ``drop`` when given: the figures never read :data:`UNREAD`) and
    its rows' positions among the run's events; ``render`` sees the whole frame first,
    where the chunk is joined, and ``write`` receives its tables here, in chunk order."""

    def finish(sub: Run, part: pd.DataFrame) -> tuple[tuple[pa.Table, ...], pd.DataFrame]:
        tables = render(sub, part) if render is not None else ()
        return tables, compact(part.drop(columns=list(drop))) if drop else part

    events = events or CHUNK_EVENTS
    for taken, (tables, part) in joined_chunks(run, label, vocab, events, jobs, finish):
        if write is not None:
            write(tables)
        yield part, taken
        del part, tables


@dataclass
class RunParts:
    """One run's chunks as :func:`join_parts` keeps them: each chunk's columns as
    Series of their own (not blocks shared by several columns, so that a column can
    be let go alone), and each chunk row's position among the run's events."""

    chunks: list[dict[str, pd.Series]]
    rows: I64


def spill(parts: RunParts, path: Path) -> Path:
    """``parts`` written to ``path`` and let go: a pickle, so every array, dtype and
    category comes back as it was (:func:`unspill`). A run's columns wait there while
    the later runs are joined, which would otherwise hold them beside their own."""
    try:
        with path.open("wb") as file:
            pickle.dump(parts, file, protocol=pickle.HIGHEST_PROTOCOL)
    except OSError as exc:  # a full disk: one line, the analysis abandoned
        raise TokenlensError(
            f"--out {path.parent.parent}: cannot hold a joined run's columns while the next "
            f"is joined ({exc.strerror or exc}); free space there, or give another --out"
        ) from None
    parts.chunks.clear()
    return path


def unspill(path: Path) -> RunParts:
    """The parts :func:`spill` wrote to ``path`` (a file of this analysis' own, in a
    directory only it writes), the file removed."""
    with path.open("rb") as file:
        parts = pickle.load(file)
    path.unlink()
    if not isinstance(parts, RunParts):
        raise TypeError(f"{path}: not a run's joined parts")
    return parts


def join_parts(
    run: Run,
    label: str,
    vocab: Vocabulary,
    render: Render | None = None,
    write: Callable[[tuple[pa.Table, ...]], None] | None = None,
    events: int | None = None,
    drop: Sequence[str] = (),
    jobs: int | None = 1,
) -> RunParts:
    """``run`` joined chunk by chunk (:func:`join_run` on each chunk), the chunks not
    yet put back together: :func:`assemble` makes one frame of several runs' parts,
    column by column. ``jobs``: processes for the joins
    (:func:`~tokenlens.analysis.chunks.joined_chunks`; None: one per core)."""
    chunks: list[dict[str, pd.Series]] = []
    rows: list[I64] = []
    for part, taken in _chunks(run, label, vocab, render, write, events, drop, jobs):
        chunks.append({str(name): part[name].copy() for name in part.columns})
        rows.append(taken)
    return RunParts(chunks, np.concatenate(rows))


def assemble(runs: list[RunParts]) -> pd.DataFrame:
    """``concat_runs([reassemble(...) of each run])``, equal value for value, dtype for
    dtype and category for category, built one column at a time: each column of every
    chunk is let go once its column of the study is built, so that the chunks and the
    study's frame are never held whole at once (a run's frame and the study's were)."""
    names = [list(chunk) for run in runs for chunk in run.chunks]
    if not names:
        return pd.DataFrame()
    if any(n != names[0] for n in names):  # chunks of other columns: pandas aligns them
        frames = []
        for run in runs:
            frames.append(reassemble([pd.DataFrame(c) for c in run.chunks], run.rows))
            run.chunks.clear()
        return concat_runs(frames)
    backs = [_inverse(run.rows) for run in runs]
    columns: dict[str, pd.Series] = {}
    for name in names[0]:
        per_run = []
        for run, back in zip(runs, backs, strict=True):
            series = [chunk.pop(name) for chunk in run.chunks]
            per_run.append(_column(name, series, run.rows, back))
            del series
        columns[name] = _join_runs(name, per_run)
        del per_run
        give_back_memory()  # the chunks' arrays of this column, before the next one
    for run in runs:
        run.chunks.clear()
    # copy=False: each column stays its own array (pandas would otherwise copy the
    # columns of one dtype into one block: a second copy of most of the frame)
    return pd.DataFrame(columns, copy=False)


def _inverse(rows: I64) -> I64:
    """``back``: output row i (in event order) is chunk row ``back[i]``."""
    back = np.empty(len(rows), dtype=np.int64)
    back[rows] = np.arange(len(rows))
    return back


def _column(name: str, series: list[pd.Series], rows: I64, back: I64) -> pd.Series:
    """One run's column from its chunks', in event order (:func:`reassemble`'s)."""
    if len(series) == 1 and np.array_equal(rows, np.arange(len(rows))):
        return series[0].reset_index(drop=True)
    if isinstance(series[0].dtype, pd.CategoricalDtype):
        return pd.Series(_categorical(name, series, back), name=name)
    joined = pd.concat(series, ignore_index=True)
    return joined.take(back).reset_index(drop=True)


def _join_runs(name: str, per_run: list[pd.Series]) -> pd.Series:
    """The runs' columns as one (:func:`concat_runs`' rule for each column)."""
    if len(per_run) == 1:
        return per_run[0]
    if name in FREE_TEXT and all(isinstance(s.dtype, pd.CategoricalDtype) for s in per_run):
        union = per_run[0].cat.categories
        for s in per_run[1:]:
            union = union.append(s.cat.categories).unique()
        per_run = [s.cat.set_categories(union) for s in per_run]
    return pd.concat(per_run, ignore_index=True)


def reassemble(parts: list[pd.DataFrame], rows: I64) -> pd.DataFrame:
    """The chunks' frames as one frame in event order (``rows``: each chunk row's
    position among the run's events), with the dtypes one join of the run gives."""
    if len(parts) == 1 and np.array_equal(rows, np.arange(len(rows))):
        return parts[0]
    back = _inverse(rows)
    columns = {}
    for name in parts[0].columns:
        series = [part[name] for part in parts]
        if isinstance(series[0].dtype, pd.CategoricalDtype):
            columns[name] = _categorical(name, series, back)
        else:
            joined = pd.concat(series, ignore_index=True)
            columns[name] = joined.take(back).reset_index(drop=True)
    return pd.DataFrame(columns)


def _categorical(name: str, series: list[pd.Series], back: I64) -> pd.Categorical:
    """One categorical column from the chunks' (whose categories differ), in event
    order, with the categories one join would give it."""
    categories: dict[object, None] = {}
    for s in series:
        categories.update(dict.fromkeys(s.cat.categories))
    cats = list(categories)
    lookup = pd.Index(cats)
    # each chunk's codes into the union's (code -1, missing, takes the appended -1)
    codes = np.concatenate(
        [np.append(lookup.get_indexer(s.cat.categories), -1)[s.cat.codes] for s in series]
    ).astype(np.int64)[back]
    if name in _FIRST_SEEN:
        seen = pd.unique(codes[codes >= 0])
        remap = np.full(len(cats) + 1, -1, dtype=np.int64)
        remap[seen] = np.arange(len(seen))
        codes, cats = remap[codes], [cats[i] for i in seen]
    dtype = pd.CategoricalDtype(pd.Index(cats, dtype=series[0].cat.categories.dtype))
    return pd.Categorical.from_codes(codes, dtype=dtype)


UNREAD = (
    "step",
    "output_index",
    "draft_known",
    "filler",
    "emitted_mismatch",
    "pos2",
    "is_particle",
    "particle_fused",
    "is_special",
    "bpe_rank",
    "draft_text",
    "target_logprob",
    "entropy",
    "topk_mass",
    "draft_target_logprob",
)
"""Columns of tokens.parquet that no figure of summary.json reads (what the join
derives other columns from, or what only the report's token view shows): written to
tokens.parquet, then left out of the figures' frame."""

FREE_TEXT = ("token_text", "draft_text")
"""Columns of token strings: one Python string per row in the join's frame."""


def compact(frame: pd.DataFrame) -> pd.DataFrame:
    """The figures' frame: the token-string columns as categoricals (one code per row,
    each distinct token once, categories sorted as ``astype("category")`` sorts them),
    for memory and for :func:`~tokenlens.analysis.columns.value_codes`; no figure reads
    their dtype. Other string columns (``particle_type``) keep pandas' string dtype
    with Arrow storage: the same values, missing values and ``astype(str)`` labels
    (``"<NA>"``, which a categorical would turn into ``"nan"``) in a fifth of the
    memory of one Python string per row. tokens.parquet keeps them as strings."""
    for name in FREE_TEXT:
        if name not in frame:
            continue
        if not isinstance(frame[name].dtype, pd.CategoricalDtype):
            frame[name] = frame[name].astype("category")
        elif not frame[name].cat.categories.is_monotonic_increasing:
            cats = frame[name].cat.categories
            frame[name] = frame[name].cat.reorder_categories(cats.sort_values())
    for name, dtype in frame.dtypes.items():
        if isinstance(dtype, pd.StringDtype) and dtype.storage == "python":
            frame[name] = frame[name].astype(ARROW_STRING)
    for name, narrow in NARROW.items():
        if name in frame and _fits(frame[name], narrow):
            frame[name] = frame[name].astype(narrow)
    return frame


NARROW = {
    "k": "int16",
    "position": "int16",
    "draft_token_id": "int32",
    "emitted_token_id": "Int32",
    "n_chars": "Int32",
    "n_bytes": "Int32",
    "draft_target_rank": "Int32",
}
"""Integer columns of the figures' frame in the narrowest type their values have room
in (token ids, ranks and lengths below 2^31, k and positions below 2^15): 32 bytes
less per event. Every figure reads them as values (comparisons, group labels, sums
taken in float64), never in their own width; a column with a value out of range keeps
its type."""


def _fits(series: pd.Series, narrow: str) -> bool:
    """Whether every value of the integer column ``series`` fits in ``narrow``."""
    dtype = series.dtype
    if not pd.api.types.is_integer_dtype(dtype) or dtype == narrow:
        return False
    if series.isna().all():
        return True
    info = np.iinfo(narrow.lower())
    return bool(info.min <= series.min() and series.max() <= info.max)


def concat_runs(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """The runs' compacted frames as one, the token-string columns kept categorical
    (their categories made one union first: pandas would turn categoricals with
    different categories into one Python string per row)."""
    if len(frames) == 1:
        return frames[0]
    for name in FREE_TEXT:
        if not all(name in f and isinstance(f[name].dtype, pd.CategoricalDtype) for f in frames):
            continue
        union = frames[0][name].cat.categories
        for f in frames[1:]:
            union = union.append(f[name].cat.categories).unique()
        for f in frames:
            f[name] = f[name].cat.set_categories(union)
    return pd.concat(frames, ignore_index=True)


ARROW_STRING = pd.StringDtype("pyarrow")
"""The figures' frame's dtype for string columns that are not token strings."""


class TableSink:
    """A Parquet file written table by table (each cast to the first one's schema)
    under a temporary name, renamed into place by :meth:`close`."""

    def __init__(self, path: Path, schema: pa.Schema | None = None) -> None:
        self.path = path
        self.partial = path.with_name(path.name + ".partial")
        self.schema = schema
        self._writer: pq.ParquetWriter | None = None

    def write(self, table: pa.Table) -> None:
        if self._writer is None:
            self.schema = self.schema or table.schema
            self._writer = pq.ParquetWriter(self.partial, self.schema)
        assert self.schema is not None
        self._writer.write_table(table.select(self.schema.names).cast(self.schema))

    def close(self) -> None:
        """Finish the file (an empty one with the schema when nothing was written)."""
        if self._writer is None:
            if self.schema is None:
                return
            self._writer = pq.ParquetWriter(self.partial, self.schema)
        self._writer.close()
        self.partial.replace(self.path)

    def abandon(self) -> None:
        """Drop the partial file (the analysis failed before finishing)."""
        if self._writer is not None:
            self._writer.close()
        self.partial.unlink(missing_ok=True)


def plain_strings(frame: pd.DataFrame) -> pa.Table:
    """``frame`` as Arrow with categoricals as plain strings (tokens.parquet's form)."""
    table = pa.Table.from_pandas(frame, preserve_index=False)
    fields = []
    for f in table.schema:
        fields.append(pa.field(f.name, pa.string()) if pa.types.is_dictionary(f.type) else f)
    return table.cast(pa.schema(fields))
