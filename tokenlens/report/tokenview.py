"""The coloured token view: chosen requests' output, one span per emitted token.

Every output token gets one of three states, from the draft events that produced it:

- ``accepted``: a draft token the target accepted;
- ``rejected``: the first rejected position of a step; the token shown is the target's
  own replacement, the hover names the draft it replaced;
- ``plain``: not covered by a judged draft (the bonus token after k acceptances, the
  first token from prefill, tokens of steps without drafts).

Texts come from the run directory (``requests.parquet`` + the manifest's tokenizer) so
the whole output is shown, byte fragments included; when the run directory is gone
only the judged tokens of ``tokens.parquet`` are shown, with gaps marked. The markup
is ``templates/tokenview.html``, where autoescape escapes everything from the model.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq

from tokenlens.errors import TokenlensError
from tokenlens.format import finite, lang_key, num
from tokenlens.rundir import MANIFEST, REQUESTS
from tokenlens.text import load_tokenizer

MAX_TOKENS = 600  # per request: long outputs are cut so the page stays light
EVENT_COLUMNS = (
    "run", "request_id", "prompt_id", "lang", "pair", "step", "position", "accepted",
    "judged", "output_index", "token_text", "draft_text", "top1_prob", "target_logprob",
)  # fmt: skip


@dataclass(frozen=True)
class Token:
    """One emitted token as the view shows it."""

    text: str
    state: str  # accepted | rejected | plain | gap
    step: int | None = None
    position: int | None = None
    draft: str | None = None
    emitted: str | None = None
    top1_prob: float | None = None
    emitted_prob: float | None = None


@dataclass(frozen=True)
class RequestView:
    run: str
    request_id: str
    prompt_id: str
    lang: str
    tokens: list[Token]
    truncated: int  # tokens left out after MAX_TOKENS


def choose(events: pd.DataFrame, max_pairs: int = 3) -> list[tuple[str, list[str]]]:
    """Per run, the request groups to show: the first ``max_pairs`` pairs (by pair id)
    that have both Japanese and English, else the first requests one by one."""
    chosen: list[tuple[str, list[str]]] = []
    for run, frame in events.groupby("run", sort=False, observed=True):
        reqs = frame.drop_duplicates("request_id")[["request_id", "lang", "pair"]]
        reqs = reqs.assign(pair=reqs["pair"].astype(object)).sort_values("request_id")
        paired = reqs.dropna(subset=["pair"]).groupby("pair", sort=True)
        groups = [_lang_order(g) for _, g in paired if {"ja", "en"} <= set(g["lang"].astype(str))][
            :max_pairs
        ]
        if not groups:
            groups = [[str(r)] for r in reqs["request_id"].head(2 * max_pairs)]
        chosen += [(str(run), ids) for ids in groups]
    return chosen


def _lang_order(group: pd.DataFrame) -> list[str]:
    rows = sorted(zip(group["lang"].astype(str), group["request_id"].astype(str), strict=True),
                  key=lambda r: (lang_key(r[0]), r[1]))  # fmt: skip
    return [rid for _, rid in rows]


def build(
    events: pd.DataFrame, runs: Sequence[dict[str, Any]], max_pairs: int = 3
) -> list[list[RequestView]]:
    """The views of the chosen requests, grouped as they are shown side by side."""
    paths = {str(r["label"]): Path(str(r.get("path", ""))) for r in runs}
    out: list[list[RequestView]] = []
    outputs: dict[str, dict[str, list[str]] | None] = {}
    for run, ids in choose(events, max_pairs):
        if run not in outputs:
            outputs[run] = _run_outputs(paths.get(run), _ids_of(events, run))
        texts = outputs[run]
        group = []
        for rid in ids:
            rows = events[(events["run"] == run) & (events["request_id"] == rid)]
            pieces = texts.get(rid) if texts is not None else None
            tokens = _tokens(rows, pieces)
            first = rows.iloc[0]
            group.append(
                RequestView(
                    run=run,
                    request_id=rid,
                    prompt_id=str(first["prompt_id"]),
                    lang=str(first["lang"]),
                    tokens=tokens[:MAX_TOKENS],
                    truncated=max(0, len(tokens) - MAX_TOKENS),
                )
            )
        out.append(group)
    return out


def _ids_of(events: pd.DataFrame, run: str) -> set[str]:
    return set(events.loc[events["run"] == run, "request_id"].astype(str))


def _run_outputs(path: Path | None, wanted: set[str]) -> dict[str, list[str]] | None:
    """Per request, the display text of every output token (None: run not readable)."""
    if path is None or not (path / REQUESTS).is_file() or not (path / MANIFEST).is_file():
        return None
    try:
        manifest = json.loads((path / MANIFEST).read_text("utf-8"))
        vocab = load_tokenizer(str(manifest["tokenizer"]))
        table = pq.read_table(path / REQUESTS, columns=["request_id", "output_token_ids"])
    except (OSError, ValueError, KeyError, TokenlensError):
        return None
    return {
        str(rid): token_texts(vocab.pieces(ids or []))
        for rid, ids in zip(
            table.column("request_id").to_pylist(),
            table.column("output_token_ids").to_pylist(),
            strict=True,
        )
        if str(rid) in wanted
    }


def token_texts(pieces: Sequence[bytes]) -> list[str]:
    """The text each token shows: every character goes to the token holding its first
    byte, so a kanji split over byte fragments appears once, on its first fragment, and
    the other fragments show nothing (the page still draws them as a thin block)."""
    data = b"".join(pieces)
    starts = [0]
    for piece in pieces:
        starts.append(starts[-1] + len(piece))

    def lead(i: int) -> int:  # the first character start at or after byte i
        while i < len(data) and data[i] & 0xC0 == 0x80:
            i += 1
        return i

    return [data[lead(a) : lead(b)].decode("utf-8", "replace") for a, b in pairwise(starts)]


def _tokens(rows: pd.DataFrame, pieces: list[str] | None) -> list[Token]:
    judged = rows[rows["judged"] & rows["output_index"].notna()]
    by_index = {int(r["output_index"]): r for r in judged.to_dict("records")}
    if pieces is None:  # no run directory: judged tokens only, gaps marked
        n = max(by_index, default=-1) + 1
        return [_token(by_index[i], None) if i in by_index else Token("", "gap") for i in range(n)]
    return [
        _token(by_index[i], piece) if i in by_index else Token(piece, "plain")
        for i, piece in enumerate(pieces)
    ]


def _token(row: dict[str, Any], piece: str | None) -> Token:
    emitted = _str(row.get("token_text"))
    logprob = finite(row.get("target_logprob"))
    return Token(
        text=piece if piece is not None else emitted or "",
        state="accepted" if row["accepted"] else "rejected",
        step=int(row["step"]),
        position=int(row["position"]),
        draft=_str(row.get("draft_text")),
        emitted=emitted,
        top1_prob=finite(row.get("top1_prob")),
        emitted_prob=None if logprob is None else math.exp(logprob),
    )


def _str(value: Any) -> str | None:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else str(value)


def hover(token: Token) -> str:
    """The tooltip: draft, emitted token and the target's confidence, quoted as JSON
    strings so whitespace and empty tokens are visible."""
    if token.state == "plain":
        return "not covered by a judged draft (bonus token, or the first token)"
    if token.state == "gap":
        return "token not in the analysis (run directory not found)"
    verdict = "accepted" if token.state == "accepted" else "rejected, replaced by the target"
    lines = [
        f"step {token.step}, draft position {token.position}: {verdict}",
        "draft: " + (_quote(token.draft) if token.draft is not None else "hidden by vLLM"),
        "emitted: " + (_quote(token.emitted) if token.emitted is not None else "unknown"),
    ]
    if token.top1_prob is not None:
        lines.append(f"target top-1 probability: {num(token.top1_prob, 'rate')}")
    if token.emitted_prob is not None:
        lines.append(f"target probability of the emitted token: {num(token.emitted_prob, 'rate')}")
    return "\n".join(lines)


def _quote(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)
