"""Events + requests + text classes -> one row per draft event (``tokens.parquet``).

Every later statistic is a sum over these rows, so the join decides what each number
means. A row is *judged* when the draft was actually compared with the target: every
accepted draft and the first rejected one of a step (``emitted_token_id`` not null).
Only judged rows carry the classes of the token that came out at their position;
positions after the first rejection were never compared, so they have no class and
count only in the per-position and all-rows (vLLM) figures.

Two kinds of rows are kept for vLLM's counts but never read as tokens:

- **Unknown draft ids** (``draft_token_id`` -1: placeholders the capture could not
  replace, manifest ``capture.draft_ids``). Such a row keeps its verdict and its emitted
  token, so it still counts where rows are classed by the token that *came out*; every
  figure about the *drafted* token (``draft_text``, the draft's rank in the target's
  top-k) leaves it out (``draft_known`` false), and -1 is never looked up as a token.
- **Filler drafts** (``filler``: Model Runner V2's n-gram repeats the last token where
  it has no match, :mod:`tokenlens.capture.filler`). No drafter proposed them and V1's
  n-gram would not have drafted there, so they are not *judged*: they count in the
  all-row and per-position figures (as vLLM counts them), not in the judged-row
  estimates and breakdowns.

Target confidence comes from the requests' top-k logprobs at the row's output index,
i.e. the target's distribution for that slot, whether the draft was accepted or not.

:func:`output_texts` gives the other file of the join, ``outputs.parquet``: the display
text of every output token (drafted or not), so that the report's token view needs
neither the run directories nor a tokenizer.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from tokenlens.analysis.rejections import CATEGORIES as REJECTION_CATEGORIES
from tokenlens.analysis.rejections import EventRows, classify_rejections
from tokenlens.arrays import F64, I64
from tokenlens.errors import TokenlensError
from tokenlens.prompts import normalise_lang
from tokenlens.rundir import Run
from tokenlens.text import CLASS_COLUMNS as TOKEN_CLASS_COLUMNS
from tokenlens.text import (
    Vocabulary,
    classify_requests,
    display_texts,
    load_tokenizer,
    token_spans,
)

# Buckets: lower edges, labels say the half-open range.
OUTPUT_EDGES = (0, 16, 64, 256, 1024)
RANK_EDGES = (0, 1_000, 10_000, 50_000, 100_000)
# UTF-8 bytes of the emitted token: one bucket per length up to 9 (a kana or kanji is 3
# bytes, so Japanese tokens sit on 3, 6, 9), then 10-12 and 13 or more.
BYTE_EDGES = (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 13)
CONF_EDGES = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99)

# The token's text and every class column the text layer computes.
CLASS_COLUMNS = ("token_text", *TOKEN_CLASS_COLUMNS)


def _int_labels(edges: Sequence[int]) -> list[str]:
    out = [f"{lo}" if hi - 1 == lo else f"{lo}-{hi - 1}" for lo, hi in pairwise(edges)]
    return [*out, f">={edges[-1]}"]


def _float_labels(edges: Sequence[float]) -> list[str]:
    out = [f"{lo:g}-{hi:g}" for lo, hi in pairwise(edges)]
    return [*out, f">={edges[-1]:g}"]


OUTPUT_LABELS = _int_labels(OUTPUT_EDGES)
RANK_LABELS = _int_labels(RANK_EDGES)
BYTE_LABELS = _int_labels(BYTE_EDGES)
CONF_LABELS = _float_labels(CONF_EDGES)


def bucket(values: F64, edges: Sequence[float], labels: Sequence[str]) -> pd.Categorical:
    """Label of the half-open bucket each value falls in; NaN stays missing."""
    idx = np.searchsorted(np.asarray(edges, dtype=np.float64), values, side="right") - 1
    codes = np.where(np.isnan(values), -1, np.clip(idx, 0, len(labels) - 1))
    return pd.Categorical.from_codes(codes, categories=list(labels))


def join_run(run: Run, label: str, tokenizer: str | Vocabulary | None = None) -> pd.DataFrame:
    """One row per event of ``run`` with language, method, classes and confidence.

    ``tokenizer`` overrides the manifest's (a name, a path or a loaded vocabulary).
    Raises :class:`TokenlensError` when the run has no events or they do not fit the
    requests (unknown request ids, output indices outside the output).
    """
    if run.events is None:
        raise TokenlensError(
            f"{run.path}: no events.parquet (trace the run with capture to analyse it)"
        )
    vocab = run_vocabulary(run, tokenizer)
    req = run.requests
    ev = run.events
    rid = req.column("request_id").to_pylist()
    if len(set(rid)) != len(rid):
        raise TokenlensError(f"{run.path}: requests.parquet repeats a request_id")
    langs = [normalise_lang(x) for x in req.column("lang").to_pylist()]
    lengths = pc.list_value_length(req.column("output_token_ids")).fill_null(0)
    lengths_np = lengths.to_numpy().astype(np.int64)
    offsets = np.concatenate(([0], np.cumsum(lengths_np)))
    flat_ids = _flat_int(req.column("output_token_ids"))

    req_index = pd.Index(rid).get_indexer(ev.column("request_id").to_pylist())
    if (req_index < 0).any():
        bad = ev.column("request_id")[int(np.flatnonzero(req_index < 0)[0])]
        raise TokenlensError(f"{run.path}: events.parquet names unknown request {bad}")
    out_idx = _nullable_int(ev.column("output_index"))
    has_out = out_idx >= 0
    if (out_idx[has_out] >= lengths_np[req_index[has_out]]).any():
        raise TokenlensError(
            f"{run.path}: events.parquet has an output_index beyond its request's output"
        )
    flat_pos = np.where(has_out, offsets[req_index] + np.maximum(out_idx, 0), -1)

    classes = classify_requests(
        [(flat_ids[offsets[i] : offsets[i + 1]], langs[i]) for i in range(len(rid))],
        vocab,
    )
    emitted = _nullable_int(ev.column("emitted_token_id"))
    draft = ev.column("draft_token_id").to_numpy(zero_copy_only=False).astype(np.int64)
    filler = (
        ev.column("filler").fill_null(False).to_numpy(zero_copy_only=False).astype(bool)
        if "filler" in ev.column_names
        else np.zeros(ev.num_rows, dtype=bool)
    )
    frame = pd.DataFrame(
        {
            "run": label,
            "method": run.method,
            "k": run.k,
            "request_id": pd.Categorical.from_codes(req_index, categories=rid),
            "prompt_id": _take_strings(req.column("prompt_id"), req_index),
            "lang": _take_strings(pa.chunked_array([pa.array(langs, pa.string())]), req_index),
            "pair": _take_strings(req.column("pair"), req_index),
            "step": ev.column("step").to_numpy(),
            "position": ev.column("position").to_numpy(),
            "draft_token_id": draft,
            "draft_known": draft >= 0,
            "filler": filler,
            "accepted": ev.column("accepted").to_numpy(zero_copy_only=False).astype(bool),
            "emitted_token_id": masked_int(emitted, emitted < 0),
            "output_index": masked_int(out_idx, ~has_out),
            "judged": (emitted >= 0) & ~filler,
        }
    )
    frame["emitted_mismatch"] = (
        has_out & (emitted >= 0) & (flat_ids[np.maximum(flat_pos, 0)] != emitted)
    )
    _add_classes(frame, classes, flat_pos, lengths_np, offsets)
    draft_text = vocab.texts(draft).astype(object)
    draft_text[draft < 0] = None
    frame["draft_text"] = pd.array(draft_text, "string")
    accepted = frame["accepted"].to_numpy(dtype=bool)
    kinds = classify_rejections(
        vocab.token_bytes,
        flat_ids,
        offsets,
        EventRows(
            request=req_index,
            step=frame["step"].to_numpy().astype(np.int64),
            position=frame["position"].to_numpy().astype(np.int64),
            output_index=out_idx,
            draft=np.where(filler, -1, draft),
            emitted=emitted,
            rejected=frame["judged"].to_numpy(dtype=bool) & ~accepted,
        ),
    )
    frame["rejection_kind"] = pd.Categorical(
        kinds.pop("rejection_kind"), categories=list(REJECTION_CATEGORIES)
    )
    for name, values in kinds.items():
        frame[name] = pd.array(values, "boolean")
    _add_confidence(frame, req, flat_pos, draft, len(flat_ids))
    frame["output_bucket"] = bucket(
        np.where(has_out, out_idx, np.nan).astype(np.float64), OUTPUT_EDGES, OUTPUT_LABELS
    )
    return frame


OUTPUTS_SCHEMA = pa.schema(
    [
        pa.field("run", pa.string(), nullable=False),
        pa.field("request_id", pa.string(), nullable=False),
        pa.field("output_index", pa.int64(), nullable=False),
        pa.field("text", pa.string(), nullable=False),
    ]
)
"""``outputs.parquet``: one row per output token of every request, in output order."""


def output_texts(run: Run, label: str, tokenizer: str | Vocabulary | None = None) -> pa.Table:
    """The display text of every output token of ``run`` (:data:`OUTPUTS_SCHEMA`).

    Each request is aligned on its own with :func:`tokenlens.text.display_texts`: every
    character goes to the token holding its first byte, so the texts of a request
    concatenate to its decoded output and later fragments of a split character are
    ``""``. ``tokenizer`` is the same override as :func:`join_run`'s.
    """
    vocab = run_vocabulary(run, tokenizer)
    req = run.requests
    rids: list[str] = []
    index: list[I64] = []
    texts: list[str] = []
    for rid, ids in zip(
        req.column("request_id").to_pylist(),
        req.column("output_token_ids").to_pylist(),
        strict=True,
    ):
        ids = ids or []
        shown = display_texts(token_spans(vocab.pieces(ids), vocab.lengths(ids)))
        rids += [str(rid)] * len(shown)
        index.append(np.arange(len(shown), dtype=np.int64))
        texts += shown
    return pa.table(
        {
            "run": pa.array([label] * len(texts), pa.string()),
            "request_id": pa.array(rids, pa.string()),
            "output_index": pa.array(np.concatenate(index) if index else [], pa.int64()),
            "text": pa.array(texts, pa.string()),
        },
        schema=OUTPUTS_SCHEMA,
    )


def run_vocabulary(run: Run, tokenizer: str | Vocabulary | None) -> Vocabulary:
    """``tokenizer`` (a name, a path or a loaded vocabulary), else the manifest's."""
    spec = tokenizer if tokenizer is not None else str(run.manifest["tokenizer"])
    return load_tokenizer(spec) if isinstance(spec, str) else spec


def masked_int(values: I64, missing: npt.NDArray[np.bool_]) -> pd.arrays.IntegerArray:
    """A nullable Int64 column: ``values`` where not ``missing``."""
    return pd.arrays.IntegerArray(np.where(missing, 0, values).astype(np.int64), missing.copy())


def _flat_int(column: pa.ChunkedArray) -> I64:
    flat = pc.list_flatten(column)
    return np.asarray(flat.to_numpy(zero_copy_only=False), dtype=np.int64)


def _nullable_int(column: pa.ChunkedArray) -> I64:
    """Int column with nulls as -1 (valid values are never negative here)."""
    return np.asarray(column.fill_null(-1).to_numpy(zero_copy_only=False), dtype=np.int64)


def _take_strings(column: pa.ChunkedArray, index: I64) -> pd.Categorical:
    values = [v if v is not None else "" for v in column.to_pylist()]
    cats = list(dict.fromkeys(values))
    codes = pd.Index(cats).get_indexer(values)
    return pd.Categorical.from_codes(codes[index] if len(index) else index, categories=cats)


def _add_classes(
    frame: pd.DataFrame, classes: pa.Table, flat_pos: I64, lengths: I64, offsets: I64
) -> None:
    """Classes of the emitted token at judged rows; bytes/characters it adds to the text."""
    judged = frame["judged"].to_numpy() & (flat_pos >= 0)
    take = pa.array(np.where(judged, flat_pos, 0))
    mask = pa.array(~judged)
    for name in CLASS_COLUMNS:
        col = classes.column(name).take(take)
        col = pc.if_else(mask, pa.scalar(None, col.type), col)
        if pa.types.is_string(col.type) and name != "token_text":
            col = col.dictionary_encode()  # few distinct labels: categorical, fast grouping
        frame[name] = col.to_pandas(types_mapper=_pandas_type)
    char_end = classes.column("char_end").to_numpy()
    prev = np.concatenate(([0], char_end[:-1]))
    prev[offsets[:-1][lengths > 0]] = 0  # first token of each request starts at 0
    n_chars = char_end - prev
    n_bytes = classes.column("byte_end").to_numpy() - classes.column("byte_start").to_numpy()
    safe = np.where(judged, flat_pos, 0)
    if len(n_chars):
        frame["n_chars"] = masked_int(n_chars[safe], ~judged)
        frame["n_bytes"] = masked_int(n_bytes[safe], ~judged)
    else:
        frame["n_chars"] = masked_int(np.zeros(len(frame), np.int64), ~judged)
        frame["n_bytes"] = masked_int(np.zeros(len(frame), np.int64), ~judged)
    frame["bytes_bucket"] = bucket(
        frame["n_bytes"].astype("float64").to_numpy(), BYTE_EDGES, BYTE_LABELS
    )
    rank = frame["bpe_rank"].astype("float64").to_numpy()
    frame["rank_bucket"] = bucket(rank, RANK_EDGES, RANK_LABELS)
    frame["particle_type"] = _particle_type(frame)
    transition = frame["transition"]
    if "" in transition.cat.categories:
        frame["transition"] = transition.cat.rename_categories({"": "none"})


def _pandas_type(t: pa.DataType) -> Any:
    if pa.types.is_string(t):
        return pd.StringDtype()
    if pa.types.is_boolean(t):
        return pd.BooleanDtype()
    if pa.types.is_int64(t):
        return pd.Int64Dtype()
    return None


def _particle_type(frame: pd.DataFrame) -> pd.Series:
    """``none``, ``fused`` (particle glued to a content word) or the particle's pos2."""
    is_p = frame["is_particle"].fillna(False).to_numpy(dtype=bool)
    fused = frame["particle_fused"].fillna(False).to_numpy(dtype=bool)
    own = frame["pos"].isin(["助詞", "function"]).fillna(False).to_numpy(dtype=bool)
    # As objects first: a categorical without "" among its categories (a run with no
    # Japanese morpheme at all) refuses fillna("").
    pos2 = frame["pos2"].astype(object).fillna("").to_numpy(dtype=object)
    out = np.where(~is_p, "none", np.where(fused, "fused", np.where(own, pos2, "particle")))
    series = pd.Series(out, index=frame.index, dtype="string")
    series[frame["script"].isna().to_numpy()] = pd.NA
    return series


def _add_confidence(
    frame: pd.DataFrame, req: pa.Table, flat_pos: I64, draft: I64, n_tokens: int
) -> None:
    """Target logprob, top-1 probability, entropy estimate, draft's logprob/rank in top-k."""
    conf = token_confidence(req, n_tokens)
    ok = flat_pos >= 0
    safe = np.where(ok, flat_pos, 0)
    for name, values in conf.items():
        if name.startswith("_"):
            continue
        col = values[safe] if n_tokens else np.zeros(len(safe))
        frame[name] = np.where(ok, col, np.nan)
    frame["conf_bucket"] = bucket(frame["top1_prob"].to_numpy(), CONF_EDGES, CONF_LABELS)
    lp, rank = _draft_in_topk(conf, np.where(ok & (draft >= 0), flat_pos, -1), draft)
    frame["draft_target_logprob"] = lp
    frame["draft_target_rank"] = masked_int(rank, rank <= 0)


def token_confidence(req: pa.Table, n_tokens: int) -> dict[str, F64]:
    """Per output token: ``target_logprob``, ``top1_prob``, ``entropy``, ``topk_mass``.

    NaN where the request has no logprobs. The entropy (nats) is estimated from the
    top-k: the listed probabilities plus the tail mass 1 - sum(top-k), spread over as
    few tokens as the ranking allows (each no likelier than the least likely listed
    one): a lower bound that is exact when the tail is empty. Also returns the
    flattened top-k (``_ids``, ``_lps``, ``_owner``) for the draft lookup.
    """
    nan = np.full(n_tokens, np.nan)
    out = {"target_logprob": nan.copy(), "top1_prob": nan.copy(), "entropy": nan.copy()}
    out["topk_mass"] = nan.copy()
    lengths = pc.list_value_length(req.column("output_token_ids")).fill_null(0).to_numpy()
    offsets = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
    ids_parts: list[I64] = []
    lps_parts: list[F64] = []
    owner_parts: list[I64] = []
    tl = req.column("token_logprob").to_pylist() if n_tokens else []
    top_ids = req.column("top_ids")
    top_lps = req.column("top_logprobs")
    for i, values in enumerate(tl):
        if values is None or len(values) != lengths[i]:
            continue
        s = slice(int(offsets[i]), int(offsets[i + 1]))
        out["target_logprob"][s] = np.asarray(values, dtype=np.float64)
        ids_i, lps_i = top_ids[i], top_lps[i]
        if not ids_i.is_valid or not lps_i.is_valid:
            continue
        if len(ids_i) != lengths[i] or len(lps_i) != lengths[i]:
            continue  # top-k lists that do not line up with the tokens: no confidence
        inner_ids = ids_i.values
        inner_lps = lps_i.values
        counts = pc.list_value_length(inner_lps).fill_null(0).to_numpy().astype(np.int64)
        flat_ids = np.asarray(pc.list_flatten(inner_ids).to_numpy(zero_copy_only=False))
        flat_lps = np.asarray(pc.list_flatten(inner_lps).to_numpy(zero_copy_only=False))
        if not (len(flat_ids) == len(flat_lps) == counts.sum()):
            continue  # a damaged row (ids and logprobs of different lengths): skip it
        owner = np.repeat(np.arange(offsets[i], offsets[i + 1], dtype=np.int64), counts)
        ids_parts.append(flat_ids.astype(np.int64))
        lps_parts.append(flat_lps.astype(np.float64))
        owner_parts.append(owner)
    ids = np.concatenate(ids_parts) if ids_parts else np.zeros(0, np.int64)
    lps = np.concatenate(lps_parts) if lps_parts else np.zeros(0)
    owner = np.concatenate(owner_parts) if owner_parts else np.zeros(0, np.int64)
    if len(lps):
        p = np.exp(lps)
        present = np.unique(owner)
        mass = np.bincount(owner, weights=p, minlength=n_tokens)
        plogp = np.bincount(owner, weights=-p * lps, minlength=n_tokens)
        top1 = np.full(n_tokens, -np.inf)
        np.maximum.at(top1, owner, p)
        pmin = np.full(n_tokens, np.inf)
        np.minimum.at(pmin, owner, p)
        tail = np.clip(1.0 - mass, 0.0, 1.0)
        pieces = np.ceil(tail / np.where(pmin > 0, pmin, 1.0))
        with np.errstate(divide="ignore", invalid="ignore"):
            tail_term = np.where(tail > 0, -tail * np.log(tail / np.maximum(pieces, 1)), 0.0)
        out["top1_prob"][present] = top1[present]
        out["topk_mass"][present] = mass[present]
        out["entropy"][present] = (plogp + tail_term)[present]
    out["_ids"] = ids.astype(np.float64)
    out["_lps"] = lps
    out["_owner"] = owner.astype(np.float64)
    return out


def _draft_in_topk(conf: dict[str, F64], flat_pos: I64, draft: I64) -> tuple[F64, I64]:
    """The target's logprob and rank (1 = top) of each draft token, when in the top-k."""
    ids = conf["_ids"].astype(np.int64)
    lps = conf["_lps"]
    owner = conf["_owner"].astype(np.int64)
    lp_out = np.full(len(draft), np.nan)
    rank_out = np.zeros(len(draft), dtype=np.int64)
    if not len(ids):
        return lp_out, rank_out
    order = np.lexsort((-lps, owner))
    owner_s, ids_s, lps_s = owner[order], ids[order], lps[order]
    first = np.searchsorted(owner_s, owner_s, side="left")
    rank_s = np.arange(len(owner_s)) - first + 1
    shift = np.int64(1 << 24)
    keys = owner_s * shift + ids_s
    korder = np.argsort(keys, kind="stable")
    keys_sorted = keys[korder]
    want = np.where(flat_pos >= 0, flat_pos * shift + np.maximum(draft, 0), -1)
    hit = np.searchsorted(keys_sorted, want)
    hit_c = np.minimum(hit, len(keys_sorted) - 1)
    found = (flat_pos >= 0) & (keys_sorted[hit_c] == want)
    src = korder[hit_c]
    lp_out[found] = lps_s[src[found]]
    rank_out[found] = rank_s[src[found]]
    return lp_out, rank_out
