"""Acceptance per language by token class, draft position and bucket, with intervals.

Two denominators (docs/analysis.md):

- *all rows*: accepted drafts / all drafts, vLLM's acceptance rate. Used for the
  per-language rate and the unconditional per-position rate (position p accepted,
  which implies 0..p-1 accepted: vLLM's per-position counter / drafts).
- *judged rows*: accepted / (accepted + first rejected), each row classified by the
  token that came out at its position. Used for every class breakdown and for the
  conditional per-position rate (a_p / a_(p-1)). Rows after a step's first rejection
  were never compared with the target and have no class.

Per-position figures (:func:`positions`) exist only per run configuration (method, k):
a position exists only in runs with k above it, so pooling runs of different k would
count the steps of a k = 1 run as rejections at position 4 (the first version did).

Groups with fewer than ``min_count`` rows are kept (with their interval) but flagged
``sparse``: tables mark them, decompositions and verdicts leave them out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from tokenlens.analysis.bootstrap import Resampler, Totals, estimate
from tokenlens.analysis.columns import once, small_codes
from tokenlens.analysis.summary_figures import PositionRate, Rate
from tokenlens.analysis.token_classes import TOKEN_CLASSES
from tokenlens.arrays import Mask


@dataclass(frozen=True)
class Breakdown:
    """One table: a frame column, and which rows (``all`` or ``judged``) it counts."""

    name: str
    column: str | None
    rows: str


# One judged-rows table per breakdown of the token-class table, in its order.
BREAKDOWNS = tuple(
    Breakdown(c.breakdown, c.column, "judged") for c in TOKEN_CLASSES if c.breakdown is not None
)


def row_mask(frame: pd.DataFrame, rows: str) -> Mask:
    """``all`` event rows, or ``judged`` rows whose emitted token has classes."""
    if rows == "all":
        return np.ones(len(frame), dtype=bool)
    judged: Mask = frame["judged"].to_numpy(dtype=bool)
    if "script" in frame:
        judged = judged & frame["script"].notna().to_numpy()
    return judged


def group_codes(frame: pd.DataFrame, column: str | None) -> tuple[npt.NDArray[np.int64], list[str]]:
    """Codes (-1 = missing) and labels of a column; buckets keep their natural order."""
    if column is None:
        return np.zeros(len(frame), dtype=np.int64), ["all"]
    series = frame[column]
    if isinstance(series.dtype, pd.CategoricalDtype):
        codes = series.cat.codes.to_numpy().astype(np.int64)
        return codes, [str(c) for c in series.cat.categories]
    codes, groups = once(series, "groups", _sorted_groups)  # once per analysis
    return codes.astype(np.int64), list(groups)


def _sorted_groups(series: pd.Series) -> tuple[npt.NDArray[Any], tuple[str, ...]]:
    codes, uniques = pd.factorize(series, sort=True)  # numbers sort as numbers
    return small_codes(codes, len(uniques)), tuple(str(u) for u in uniques)


def lang_codes(frame: pd.DataFrame) -> tuple[npt.NDArray[np.int64], list[str]]:
    return group_codes(frame, "lang")


RateTable = dict[str, dict[str, Rate]]
"""``{lang: {group: Rate}}``: one breakdown, as the analysis builds it."""


def rates(
    frame: pd.DataFrame,
    rs: Resampler,
    column: str | None,
    rows: Mask,
    min_count: int,
    denominator: Mask | None = None,
) -> dict[str, dict[str, dict[str, Any]]]:
    """:func:`rate_table` as summary.json holds it:
    ``{lang: {group: {rate, ci_low, ci_high, n, accepted, requests, sparse}}}``."""
    return {
        lang: {group: rate.to_json() for group, rate in block.items()}
        for lang, block in rate_table(frame, rs, column, rows, min_count, denominator).items()
    }


def rate_table(
    frame: pd.DataFrame,
    rs: Resampler,
    column: str | None,
    rows: Mask,
    min_count: int,
    denominator: Mask | None = None,
) -> RateTable:
    """``{lang: {group: Rate}}`` over ``rows`` grouped by ``column`` (one group, ``all``,
    without one); groups without a row are left out.

    ``requests`` counts the prompts (clusters) with rows in the group. With
    ``denominator`` (a row mask), every group of a language shares the same denominator:
    the number of those rows in the language (vLLM's per-position rate divides the
    accepted count at position p by the number of drafts, i.e. of position-0 rows).
    """
    lcode, langs = lang_codes(frame)
    gcode, groups = group_codes(frame, column)
    n_g = len(groups)
    combo = np.where((lcode >= 0) & (gcode >= 0), lcode * n_g + gcode, -1)
    size = len(langs) * n_g
    accepted = frame["accepted"].to_numpy(dtype=np.float64)
    if denominator is None:
        num, den, cells = rs.counted(accepted, combo, size, rows)
    else:
        cells = rs.cells(combo, size, rows)
        num = rs.total(cells.sums(accepted))
        per_lang_den = rs.total(rs.cells(lcode, len(langs), denominator).counts())
        den = Totals(
            point=np.repeat(per_lang_den.point, n_g), boot=np.repeat(per_lang_den.boot, n_g, axis=1)
        )
    with np.errstate(divide="ignore", invalid="ignore"):
        point = num.point / den.point
        boot = num.boot / den.boot
    requests = cells.clusters()
    g, h = rs.design_of(cells)
    lo, hi = rs.rate_interval(point, boot, den.point, g, h)
    out: RateTable = {}
    for li, lang in enumerate(langs):
        block: dict[str, Rate] = {}
        for gi, name in enumerate(groups):
            j = li * n_g + gi
            if requests[j] == 0 or den.point[j] == 0:  # no row of this group
                continue
            n = int(den.point[j])
            figure = estimate(point[j], lo[j], hi[j], n)
            block[name] = Rate.of(figure, int(num.point[j]), int(requests[j]), n < min_count)
        out[lang] = block
    return out


def per_lang(
    frame: pd.DataFrame, rs: Resampler, rows: Mask, min_count: int
) -> dict[str, dict[str, Any]]:
    """``{lang: {rate, ci_low, ci_high, n, accepted, requests, sparse}}`` over ``rows``.

    Languages without a row in ``rows`` are left out (a run of one language, as bench
    writes them, among runs of others).
    """
    blocks = rates(frame, rs, None, rows, min_count)
    return {lang: block["all"] for lang, block in blocks.items() if "all" in block}


def by_position(frame: pd.DataFrame, rs: Resampler, rows: Mask, min_count: int) -> RateTable:
    """Accepted at position p / number of drafts (verification steps): vLLM's per-position
    counter over its ``num_drafts``, whose sum over p is the mean number of accepted
    tokens per step (the speed model's a_p). ``rows`` must be one run configuration.

    A draft has a position-0 row; a step that proposed fewer than k tokens (n-gram near
    the end of its match) counts in the denominator of every position.
    """
    drafts = rows & (frame["position"].to_numpy() == 0)
    return rate_table(frame, rs, "position", rows, min_count, denominator=drafts)


def positions(
    frame: pd.DataFrame,
    rs: Resampler,
    rows: Mask,
    min_count: int,
    reached: tuple[pd.DataFrame, Resampler, Mask] | None = None,
) -> tuple[dict[str, dict[str, PositionRate]], RateTable]:
    """Acceptance by draft position of one run configuration (method, k), over the steps
    that proposed a draft at p: ``(unconditional, conditional)``, each ``{lang:
    {position: rate}}``. ``rows`` must select runs of one configuration (positions of
    runs with different k are different quantities).

    - unconditional: accepted at p / steps with a draft at p (p accepted implies 0..p-1
      accepted), with ``per_draft`` (accepted at p / all the run's steps, vLLM's
      per-position counter over ``num_drafts``) and ``drafts`` (those steps);
    - conditional: accepted at p / steps that reached p (the judged rows at p), or
      over ``reached`` (a frame, its resampler and rows: those rows, where the rows of
      ``frame`` are counts that do not say how many of them reached p).

    Steps are counted through ``rs`` (:meth:`Resampler.cells`), so rows that stand for
    several events (:class:`~tokenlens.analysis.request_figures.CountedResampler`)
    count as those events.
    """
    unconditional = rate_table(frame, rs, "position", rows, min_count)
    per_draft = by_position(frame, rs, rows, min_count)
    lcode, langs = lang_codes(frame)
    first = rows & (frame["position"].to_numpy() == 0) & (lcode >= 0)
    steps = rs.cells(lcode, len(langs), first).counts().sum(axis=0)
    typed = {
        lang: {
            p: PositionRate.from_rate(
                rate,
                per_draft=(per_draft.get(lang, {}).get(p) or Rate()).rate,
                drafts=int(steps[li]),
            )
            for p, rate in unconditional.get(lang, {}).items()
        }
        for li, lang in enumerate(langs)
        if lang in unconditional
    }
    if reached is None:
        reached = (frame, rs, rows & frame["judged"].to_numpy(dtype=bool))
    conditional = rate_table(reached[0], reached[1], "position", reached[2], min_count)
    return typed, conditional


def text_per_step(
    frame: pd.DataFrame, rs: Resampler, rows: Mask | None = None
) -> dict[str, dict[str, dict[str, Any]]]:
    """Accepted tokens, characters and UTF-8 bytes per verification step, per language,
    over ``rows`` (default: every row).

    A step is one (request, step) pair; every step has a position-0 row. Japanese
    carries ~1.5 characters per Qwen token and English ~4, so the same token
    acceptance means very different text speed: this is the figure to compare. It
    depends on k: read it per run.
    """
    accepted = frame["accepted"].to_numpy(dtype=bool)
    return per_step(
        frame,
        rs,
        np.ones(len(frame), dtype=bool) if rows is None else rows,
        (frame["position"].to_numpy() == 0).astype(np.float64),
        {
            "accepted_tokens": accepted.astype(np.float64),
            "accepted_chars": _filled(frame, "n_chars") * accepted,
            "accepted_bytes": _filled(frame, "n_bytes") * accepted,
        },
    )


def per_step(
    frame: pd.DataFrame,
    rs: Resampler,
    rows: Mask,
    steps: npt.NDArray[np.float64],
    totals: dict[str, npt.NDArray[np.float64]],
) -> dict[str, dict[str, dict[str, Any]]]:
    """``{lang: {name: estimate}}``: each of ``totals`` (per-row values) summed over
    ``rows`` and divided by the steps they hold (``steps``: 1 on a step's position-0
    row, or a row's count of steps where rows are per-request counts)."""
    lcode, langs = lang_codes(frame)
    cells = rs.cells(lcode, len(langs), rows)
    n_steps = rs.total(cells.sums(steps))
    g, h = rs.design_of(cells)
    out: dict[str, dict[str, dict[str, Any]]] = {lang: {} for lang in langs}
    for name, values in totals.items():
        num = rs.total(cells.sums(values))
        with np.errstate(divide="ignore", invalid="ignore"):
            point, boot = num.point / n_steps.point, num.boot / n_steps.boot
        lo, hi = rs.interval(point, boot, g, h)
        for li, lang in enumerate(langs):
            if n_steps.point[li] == 0:
                continue
            count = int(n_steps.point[li])
            out[lang][name] = estimate(point[li], lo[li], hi[li], count).to_json()
    return {lang: block for lang, block in out.items() if block}


def _filled(frame: pd.DataFrame, column: str) -> npt.NDArray[np.float64]:
    if column not in frame:
        return np.zeros(len(frame))
    return np.asarray(frame[column].astype("float64").fillna(0.0).to_numpy(), dtype=np.float64)
