"""The coloured token view: chosen requests' output, one span per emitted token.

Every output token gets one of three states, from the draft events that produced it:

- ``accepted``: a draft token the target accepted;
- ``rejected``: the first rejected position of a step; the token shown is the target's
  own replacement, the hover names the draft it replaced;
- ``plain``: not covered by a judged draft (the bonus token after k acceptances, the
  first token from prefill, tokens of steps without drafts).

Texts come from the analysis' ``outputs.parquet`` (the display text of every output
token, written by ``analyze`` with :func:`tokenlens.text.display_texts`), so the whole
output is shown, byte fragments included, without a tokenizer or the run directories.
An analysis written before that file existed shows only the judged tokens of
``tokens.parquet``, with gaps marked. The markup is ``templates/tokenview.html``, where
autoescape escapes everything from the model.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq

from tokenlens.format import finite, lang_key, num

MAX_TOKENS = 600  # per request: long outputs are cut so the page stays light
EVENT_COLUMNS = (
    "run", "request_id", "prompt_id", "lang", "pair", "step", "position", "accepted",
    "judged", "output_index", "token_text", "draft_text", "top1_prob", "target_logprob",
)  # fmt: skip
OUTPUT_COLUMNS = ("run", "request_id", "output_index", "text")  # of outputs.parquet


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


def read_outputs(path: Path) -> pd.DataFrame | None:
    """``outputs.parquet`` of an analysis, or None when the analysis predates it."""
    if not path.is_file():
        return None
    return pq.read_table(path, columns=list(OUTPUT_COLUMNS)).to_pandas()


def build(
    events: pd.DataFrame, outputs: pd.DataFrame | None, max_pairs: int = 3
) -> list[list[RequestView]]:
    """The views of the chosen requests, grouped as they are shown side by side.

    ``outputs`` is :func:`read_outputs`' frame; None shows only the judged tokens."""
    out: list[list[RequestView]] = []
    for run, ids in choose(events, max_pairs):
        group = []
        for rid in ids:
            rows = events[(events["run"] == run) & (events["request_id"] == rid)]
            tokens = _tokens(rows, _texts(outputs, run, rid))
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


def _texts(outputs: pd.DataFrame | None, run: str, rid: str) -> list[str] | None:
    """The display text of each output token of one request (None: no outputs.parquet).
    A split character's later fragments are "" (the page still draws them as a thin
    block)."""
    if outputs is None:
        return None
    mine = outputs[(outputs["run"] == run) & (outputs["request_id"] == rid)]
    return [str(t) for t in mine.sort_values("output_index")["text"]]


def _tokens(rows: pd.DataFrame, pieces: list[str] | None) -> list[Token]:
    judged = rows[rows["judged"] & rows["output_index"].notna()]
    by_index = {int(r["output_index"]): r for r in judged.to_dict("records")}
    if pieces is None:  # an analysis without outputs.parquet: judged tokens only, gaps marked
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
        return "token text not in the analysis (written before outputs.parquet existed)"
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
