"""The rejection kinds as table rows and sentences, one wording for tables.md, FINDINGS.md
and the HTML report (:mod:`tokenlens.analysis.rejections` defines the kinds).

Only the words "the drafter proposed the target's very text" name re-segmentations
(``merge`` + ``confirmed``); a file written before the kinds (``split``: T starts with
D, mostly byte-prefix coincidences) is shown with its own, looser words.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from tokenlens.analysis.summary_figures import Share
from tokenlens.analysis.summary_sections import RejectionFamily, RejectionRun
from tokenlens.format import LANG_ORDER, MISSING, interval, lang_name, lang_order

# (key of the block, column header)
KIND_COLUMNS = (
    ("merge", "merge"),
    ("confirmed", "confirmed"),
    ("prefix_diverged", "prefix, diverged"),
    ("prefix_open", "prefix, open (unknown)"),
    ("text", "text"),
    ("resegmentation", "re-segmentations (merge + confirmed)"),
    ("resegmentation_whitespace", "of which at whitespace"),
)
LEGACY_COLUMNS = (("split", "T starts with D (first versions' split)"), ("text", "text"))
FLAG_COLUMNS = (
    ("draft_partial", "draft ends inside a character"),
    ("emitted_partial", "replacement ends inside a character"),
)
DEFINITION = (
    "For a rejected draft whose identity is known, with D its bytes, E the bytes of the "
    "token the target emitted there, T the target's bytes from there on and C = D followed "
    "by the drafter's later drafts of the same step: *merge* when D is longer than E and T "
    "starts with D (the drafter wrote the target's text as one token where the target used "
    "several); *confirmed* when D is a strict prefix of E and C starts with E (the "
    "drafter's own continuation spells the target's token); *prefix, diverged* when D is a "
    "strict prefix of E and C departs from E before covering it (a byte-prefix "
    "coincidence: other text); *prefix, open* when D is a strict prefix of E and C agrees "
    "but ends first (unknown: the step ended, or the drafter's later drafts are not known, "
    "as in a replay without `--branch-drafts`); *text* otherwise. A *re-segmentation* "
    "(merge + confirmed) is a rejection where the drafter proposed the target's very "
    "text, cut into tokens differently. *Unknown*: the output ended inside D (no kind)."
)
LEGACY_DEFINITION = (
    "This summary was written before the rejection kinds: its *split* share counts "
    "rejections where T, the target's bytes from that position on, starts with D, the "
    "draft's bytes. Most of those are byte-prefix coincidences (a draft ` a` against "
    "` affecting`), not re-segmentations; analyse the runs again for the kinds."
)


def share_cell(share: Share | None) -> str:
    """``3 (0.2% [0.1, 0.7])``: the count and the share with its interval."""
    if share is None:
        return MISSING
    count = share.count if share.count is not None else MISSING
    return f"{count} ({interval(share, 'share', 'share')})"


def columns(blocks: Mapping[str, RejectionFamily]) -> tuple[tuple[str, str], ...]:
    """The share columns these blocks have: the kinds, or a file's ``split``/``text``."""
    legacy = bool(blocks) and all(b.legacy for b in blocks.values())
    return (*(LEGACY_COLUMNS if legacy else KIND_COLUMNS), *FLAG_COLUMNS)


def header(blocks: Mapping[str, RejectionFamily], first: str) -> list[str]:
    return [first, "language", "rejections", *(h for _, h in columns(blocks)), "unknown"]


def rows(
    blocks: Mapping[str, RejectionFamily], label: Callable[[str, RejectionFamily], str]
) -> list[list[str]]:
    """One row per block and language: rejections, each share column, unknown."""
    cols = columns(blocks)
    out = []
    for name, block in blocks.items():
        for lang in lang_order(block.rejections):
            out.append(
                [
                    label(name, block),
                    lang_name(lang),
                    str(block.rejections.get(lang)),
                    *(share_cell(block.shares.get(key, {}).get(lang)) for key, _ in cols),
                    str(block.unknown.get(lang, 0)),
                ]
            )
    return out


def run_label(name: str, block: RejectionFamily) -> str:
    """``draft_model-k3 (continuation known)``; partly known with the counts (``3,340 of
    3,345 later drafts unknown``)."""
    if not isinstance(block, RejectionRun) or block.continuation is None:
        return name
    counts = ""
    if block.continuation == "partly known" and block.later_drafts is not None:
        counts = f": {block.later_drafts_unknown:,} of {block.later_drafts:,} later drafts unknown"
    return f"{name} (continuation {block.continuation}{counts})"


def gap(block: RejectionFamily) -> Any:
    """The JA − EN difference the block has: of re-segmentations, else (older file) of
    the split share."""
    return block.resegmentation_gap if block.resegmentation_gap is not None else block.split_gap


def open_runs(runs: Mapping[str, RejectionRun], family: str) -> list[str]:
    """The family's runs whose drafter continuation is not (fully) known: their
    re-segmentation share is a lower bound."""
    return [
        name
        for name, run in runs.items()
        if run.family == family and run.continuation not in (None, "known")
    ]


def short_shares(block: RejectionFamily, key: str) -> str | None:
    """``Japanese 0.3% [0.1, 0.9] (4 of 1,324), English …``; None without both languages."""
    shares = block.shares.get(key) or {}
    if not all(lang in shares for lang in LANG_ORDER):
        return None
    return ", ".join(
        f"{lang_name(lang)} {interval(shares[lang], 'share', 'share')} "
        f"({shares[lang].count} of {shares[lang].n})"
        for lang in LANG_ORDER
    )
