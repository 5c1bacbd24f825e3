"""Figures from per-request counts: ``request-stats``' table -> acceptance, text per
step and one class breakdown per drafter family, with the analysis' own bootstrap.

The table (:mod:`~tokenlens.analysis.request_stats`: per run, request and class of one
column, the events, accepted drafts, judged rows and their accepted drafts) holds
everything these figures are sums of, so a fleet's counts, made by Spark where its
traces lie, give here the figures ``tokenlens analyze`` writes for the same runs and
settings, equal to the last digit: ``acceptance`` and ``acceptance_judged`` (vLLM's rate
and the judged-rows rate per language), ``text_per_step`` (accepted tokens, characters
and bytes per verification step) and the class's ``by_*`` table (``by_script``,
``by_byte_length``...), per drafter family. The clusters, strata and seeded weights
are :class:`~tokenlens.analysis.bootstrap.Resampler.from_frame`'s, rebuilt from the
table's keys; each row of the table stands for its count of events
(:class:`CountedResampler`), and every sum is of whole numbers, exact in any order.

Memory is that of the table (a few rows per request and class), not of the events.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from tokenlens.analysis.bootstrap import DEFAULT_METHOD, Cells, Resampler, clusters_of
from tokenlens.analysis.breakdown import per_lang, per_step, rates
from tokenlens.analysis.columns import labels
from tokenlens.analysis.decompose import Support
from tokenlens.analysis.parts import configurations, prompts_per_lang
from tokenlens.analysis.request_gaps import LENGTH, family_gaps, gap_block
from tokenlens.analysis.request_runs import POSITION, CountedRows, run_blocks
from tokenlens.analysis.request_stats import BY, CONFIDENCE, KEYS
from tokenlens.analysis.request_tables import combine, table_paths
from tokenlens.analysis.request_verdicts import Counts, verdicts
from tokenlens.analysis.rules import FREE, TRAINED, Rules
from tokenlens.analysis.run_section import margin_of
from tokenlens.analysis.summarize import acceptance_per_k
from tokenlens.analysis.summary_fields import json_value
from tokenlens.analysis.token_classes import TOKEN_CLASSES
from tokenlens.arrays import F64, I64, Mask
from tokenlens.errors import TokenlensError
from tokenlens.rundir import write_json_atomic

NEEDED = (*KEYS, "class", "events", "accepted", "steps", "judged", "judged_accepted")
"""The table's columns these figures read, as every request-stats wrote them."""
ADDED = ("class_column", "accepted_chars", "accepted_bytes")
"""Columns request-stats writes since request-figures (2026-12-05), read too."""
LATER = ("reached", "class_edges", "class_k", "class_k_edges")
"""Columns of a later request-stats, read where present (a table by position has them)."""
LABELS = (*(c for c in KEYS if c != "k"), "class_column", "class_edges", "class_k_edges")
"""The table's text columns, read as dictionaries."""


@dataclass(frozen=True)
class FiguresConfig:
    """``analyze``'s settings that these figures depend on (the same defaults)."""

    seed: int = 0
    n_boot: int = 1000
    min_count: int = 30
    interval: str = DEFAULT_METHOD
    support: Support = field(default_factory=Support)
    delta: float = Rules.delta
    alpha: float = Rules.alpha
    min_prompts: int = Rules.min_prompts
    draft_cost: float | None = None

    @property
    def rules(self) -> Rules:
        """The verdict rules, as ``analyze`` makes them of the same options."""
        return Rules(delta=self.delta, min_prompts=self.min_prompts, alpha=self.alpha)


class CountedCells(Cells):
    """:class:`Cells` whose rows each stand for ``weight`` rows of events."""

    def __init__(self, rs: CountedResampler, group: I64, n_groups: int, rows: Mask) -> None:
        super().__init__(rs, group, n_groups, rows)
        self.weight: F64 = rs.row_weight[self.keep]

    def counts(self) -> F64:
        """Events per (cluster, group): the sums of the rows' weights."""
        if self._counts is None:
            size = self.shape[0] * self.shape[1]
            counts = np.bincount(self.index, weights=self.weight, minlength=size)
            self._counts = np.asarray(counts, dtype=np.float64).reshape(self.shape)
        return self._counts


class CountedResampler(Resampler):
    """A :class:`Resampler` over rows that are counts: row i stands for
    ``row_weight[i]`` (> 0) events, so the rows and presence a figure counts are
    those of the events. Made with every row's cluster; :meth:`counting` gives the
    rows and weights of one figure, with the same replicates."""

    row_weight: F64

    def counting(self, rows: Mask, weight: F64) -> CountedResampler:
        """The same replicates over ``rows`` (a mask of the rows it was made with),
        each standing for ``weight`` events (one per selected row)."""
        out = copy.copy(self)
        out.cluster = self.cluster[rows]
        out.row_weight = weight
        return out

    def cells(self, group: I64, n_groups: int, rows: Mask) -> Cells:
        return CountedCells(self, group, n_groups, rows)

    def restricted(self, rows: Mask) -> CountedResampler:
        """The same replicates over ``rows``, each keeping its weight."""
        return self.counting(rows, self.row_weight[rows])


def read_table(source: str | Path) -> tuple[pd.DataFrame, str]:
    """The table ``request-stats`` wrote (a file, or Spark's directory of parts) and
    the class column it counts by (its ``class_column``); one-line errors otherwise."""
    path = Path(source)
    if not path.exists():
        raise TokenlensError(f"{source}: no such file or directory")
    try:
        names = pq.ParquetDataset(path, partitioning=None).schema.names
        missing = [c for c in NEEDED if c not in names]
        if missing:
            raise TokenlensError(
                f"{source}: not a table of `tokenlens request-stats` (no column "
                f"{', '.join(missing)})"
            )
        if any(c not in names for c in ADDED):
            raise TokenlensError(
                f"{source}: made by an older request-stats, which did not record the class "
                "column it counted by or the accepted text: run `tokenlens request-stats` "
                "on it again"
            )
        wanted = [*NEEDED, *ADDED, *(c for c in LATER if c in names)]  # older: fewer
        # only these columns, each text column read as a dictionary: a few bytes a row
        # (the bins' edges repeat a long text on every row), categoricals in pandas
        labelled = [c for c in LABELS if c in names]
        table: pa.Table = pq.read_table(
            path, columns=wanted, partitioning=None, read_dictionary=labelled
        )
    except (pa.ArrowException, OSError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise TokenlensError(f"{source}: not a Parquet table ({first})") from None
    by = {str(v) for v in table.column("class_column").unique().to_pylist()}
    if len(by) != 1 or not by <= set(BY):
        raise TokenlensError(
            f"{source}: its rows count by {', '.join(sorted(by)) or 'nothing'}; "
            "one table counts by one class column"
        )
    frame = table.to_pandas(strings_to_categorical=True)
    return frame, by.pop()


def write_figures(source: str | Path, out: Path, config: FiguresConfig) -> dict[str, Any]:
    """:func:`figures` of the table at ``source``, written to ``out`` (JSON; an existing
    file is refused, not overwritten) with the settings and source they came from; of
    every table, combined, where ``source`` is the directory of ``--by all``."""
    if out.exists():
        raise TokenlensError(f"{out} exists: give another --out (nothing was overwritten)")
    if not out.parent.is_dir():
        raise TokenlensError(f"{out.parent}: no such directory")
    tables = table_paths(Path(source))
    if tables:  # request-stats --by all: one table per class column
        counted: dict[str, dict[str, Any]] = {}
        for by, path in tables.items():
            stats, column = read_table(path)
            if column != by:
                raise TokenlensError(f"{path}: counts by {column}, not {by}")
            length = counted.get(LENGTH)  # BY's order: n_bytes before confidence
            standardised = (
                {f: b.get("gap_length_standardised") for f, b in length["families"].items()}
                if by == CONFIDENCE and length is not None
                else None
            )
            counted[by] = figures(stats, by, config, standardised)
        result = {"source": str(source), **combine(counted)}
    else:
        stats, by = read_table(source)
        result = {"source": str(source), **figures(stats, by, config)}
    write_json_atomic(out, result)
    return result


def figures(
    stats: pd.DataFrame,
    by: str,
    config: FiguresConfig,
    standardised: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """``{"by", "breakdown", "scope", "settings", "families", "acceptance_per_k", "gap",
    "runs"}`` from the table of :func:`read_table`: per drafter family (``families``),
    its ``methods``, ``runs``, ``configurations`` and ``prompts``, ``acceptance``,
    ``acceptance_judged``, the class breakdown (``breakdown`` names it, None for a
    table by byte length or position), ``text_per_step`` and the gaps
    (:func:`~tokenlens.analysis.request_gaps.family_gaps`); ``gap``, summary.json's
    section of that name for the primary family (``scope``: trained drafters when
    present), less what needs rows; ``acceptance_per_k``, vLLM's rate per family and
    k; by confidence, ``h2_contrast`` and ``hypotheses``, with their sensitivity when
    ``standardised`` gives every family's length-standardised gap
    (:mod:`~tokenlens.analysis.request_verdicts`); ``runs``, one block per run
    (:func:`~tokenlens.analysis.request_runs.run_blocks`)."""
    if len(stats) == 0:
        raise TokenlensError("the table has no rows: nothing to count")
    name = _breakdown(by)
    keys = pd.DataFrame({c: _text(stats[c]) for c in ("pair", "prompt_id", "request_id", "lang")})
    cluster, stratum, unit = clusters_of(keys)  # Resampler.from_frame's
    rs = CountedResampler(
        cluster,
        stratum,
        config.n_boot,
        config.seed,
        config.interval,
        unit=unit,
        decision_level=config.rules.decision_level,
    )
    settings = {
        "seed": config.seed,
        "bootstrap": config.n_boot,
        "interval": config.interval,
        "min_count": config.min_count,
        "cluster": unit,
        "clusters": rs.n_clusters,
    }
    rs.row_weight = np.ones(len(cluster))  # each row one event until counting() says
    frame = _frame(stats, by)

    def column(name: str) -> F64:
        return np.asarray(stats[name].to_numpy(np.float64), dtype=np.float64)

    def counted(weight: str, accepted: str) -> CountedRows:
        """The table's rows with a count in ``weight``, each standing for that many."""
        keep = column(weight) > 0
        rows = frame[keep].reset_index(drop=True).assign(accepted=column(accepted)[keep])
        return CountedRows(rows, rs.counting(keep, column(weight)[keep]), keep)

    events = counted("events", "accepted")
    # every judged row counts in acceptance_judged; those without a class (no BPE
    # rank, say) are left out of the breakdown alone (its group codes: -1)
    judged = counted("judged", "judged_accepted")
    # every accepted draft was judged: accepted among the rows that reached p
    reached = counted("reached", "accepted") if by == POSITION else None
    # breakdown.text_per_step's totals, summed per request, for the rows of events
    steps = column("steps")[events.keep]
    text = {
        name: column(source)[events.keep]
        for name, source in (
            ("accepted_tokens", "accepted"),
            ("accepted_chars", "accepted_chars"),
            ("accepted_bytes", "accepted_bytes"),
        )
    }
    family_of = _text(stats["family"])
    out: dict[str, dict[str, Any]] = {}
    fams: dict[str, Mask] = {}  # each family's rows of events
    gap: dict[str, Any] | None = None
    for family in (TRAINED, FREE):
        mine = family_of == family
        if not mine.any():
            continue
        rows = (events.of(mine), judged.of(mine))
        fams[family] = rows[0]
        block: dict[str, Any] = {
            "methods": sorted(set(events.frame["method"].to_numpy()[rows[0]])),
            "runs": sorted(set(events.frame["run"].to_numpy()[rows[0]])),
            "configurations": configurations(events.frame, rows[0]),
            "acceptance": per_lang(events.frame, events.rs, rows[0], config.min_count),
            "acceptance_judged": per_lang(judged.frame, judged.rs, rows[1], config.min_count),
            "prompts": prompts_per_lang(events.frame, rows[0]),
        }
        if name is not None:
            block[name] = rates(judged.frame, judged.rs, by, rows[1], config.min_count)
        block["text_per_step"] = per_step(events.frame, events.rs, rows[0], steps, text)
        ks = sorted({int(k) for k in events.frame["k"].to_numpy()[rows[0]]})
        if len(ks) >= 2:  # summarize.label_pooled's labels
            pooled = [*block["acceptance"].values(), *block["acceptance_judged"].values()]
            pooled += [f for per in block["text_per_step"].values() for f in per.values()]
            for figure in pooled:
                figure.update(pooled_over_k=ks, family=family)
        block.update(family_gaps(events, judged, rows, by, config.support, ks, family))
        out[family] = block
        if gap is None:  # the first family found: trained drafters when present
            gap = gap_block(events, judged, rows, by, config.support, family)
    if not out:
        raise TokenlensError(f"no row of the {TRAINED} or {FREE} drafter family")
    decided: dict[str, Any] = {}
    if by == CONFIDENCE:
        counts = Counts(stats, events, judged, family_of)
        parts, decided = verdicts(counts, config.rules, config.support, standardised)
        for family, block in out.items():
            block["confidence"] = json_value(parts.families[family].confidence)
    scope = TRAINED if TRAINED in out else FREE
    run_of = _text(stats["run"])
    runs = run_blocks(
        sorted(set(run_of)),
        run_of,
        events,
        judged,
        reached,
        steps,
        text,
        config.min_count,
        (config.draft_cost, "option") if config.draft_cost is not None else None,
    )
    points = [  # each run's (family, k, English judged rate): summary.json's margin
        (str(family_of[run_of == r["run"]][0]), r["k"], en)
        for r in runs
        if (en := r["acceptance_judged"].get("en", {}).get("rate")) is not None
    ]
    return {
        "by": by,
        "breakdown": name,
        "scope": scope,
        "settings": settings,
        "families": out,
        "acceptance_per_k": acceptance_per_k(events.frame, events.rs, fams, config.min_count),
        "gap": gap,
        **decided,
        "runs": runs,
        "margin_in_speed": json_value(margin_of(points, config.rules.delta)),
    }


def _breakdown(by: str) -> str | None:
    """The ``by_*`` name summary.json gives the breakdown of class column ``by`` (None
    for byte length, position and confidence, whose counts give the standardised gap,
    the rates by position and the verdicts, not a ``by_*`` table)."""
    if by in (LENGTH, POSITION, CONFIDENCE):
        return None
    for c in TOKEN_CLASSES:
        if c.column == by and c.breakdown is not None:
            return c.breakdown
    raise TokenlensError(f"no breakdown of class column {by!r}")


def _frame(stats: pd.DataFrame, by: str) -> pd.DataFrame:
    """The columns the breakdown functions read, one row per row of ``stats`` (its
    ``accepted`` is the figure's own: all drafts' or judged rows')."""
    return pd.DataFrame(
        {
            "lang": stats["lang"],
            by: stats["class"].to_numpy(dtype=object),
            "family": stats["family"],
            "method": stats["method"],
            "run": stats["run"],
            "prompt_id": stats["prompt_id"],
            "request_id": stats["request_id"],
            "k": stats["k"].to_numpy(),
            **({"class_k": stats["class_k"].to_numpy(dtype=object)} if "class_k" in stats else {}),
        }
    )


def _text(series: pd.Series) -> np.ndarray[Any, np.dtype[np.object_]]:
    """Labels as :func:`~tokenlens.analysis.columns.labels` reads them (a missing one as
    "nan", or "None" from an object column: the cluster rules read both as missing)."""
    if isinstance(series.dtype, pd.CategoricalDtype):
        return labels(pd.DataFrame({"c": series}), "c")
    return np.asarray([str(v) for v in series.to_numpy(dtype=object)], dtype=object)
