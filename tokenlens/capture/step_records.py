"""A scheduler step as flat columns: what the hook snapshots, and the records readers get.

The scheduler hook (:mod:`tokenlens.capture.plugin`) runs on vLLM's scheduler thread,
inside an engine whose Python heap holds hundreds of thousands of objects. What it
costs there is not only its own time: every list or dict it creates per request counts
towards CPython's cyclic garbage collector, whose collections run in the middle of
vLLM's own code. Measured on vLLM's real scheduler at batch 256
(benchmarks/bench_hook_step.py): the earlier records, one dict and two lists per
request and step, tripled the young collections and added a full collection every
~90 steps, about 0.6 s of collector time per 80 steps, far more than the hook's own
clock showed. So a step is held in a fixed number of flat lists, whatever the batch:
request ids, output lengths before, the sampled tokens of all requests end to end with
their counts, the kept counts, and the counted requests' drafts end to end with their
counts, accepted and invalid numbers. No container is made per request, the writer
thread encodes lists of ints without a Python loop, and readers turn the columns into
the records older step files hold (:func:`line_records`).

A record (one step of one request; the step file's older form, docs/capture.md):
``r`` request id, ``b`` output length before the step (``None``: no sampled tokens),
``g`` the sampled tokens, ``n`` how many of them vLLM kept, and, when vLLM counted a
verification step, ``d`` the drafts, ``a`` accepted, ``i`` invalid drafts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import chain
from typing import Any


@dataclass(slots=True)
class StepSnapshot:
    """What one ``update_from_output`` call left for its line.

    Per request of the model's output, in its order: ``ids``, ``requests`` (vLLM's
    ``Request``, ``None`` when unknown to the scheduler; emptied once vLLM returned, so
    that vLLM's objects stay on the scheduler's thread), ``before`` (output length
    before the step, -1 when unknown), ``counts`` (sampled tokens; the tokens themselves
    end to end in ``tokens``) and, once vLLM returned, ``kept``. Per request vLLM
    counted a verification step for: ``spec_ids``, ``spec_k`` (drafts; the drafts end to
    end in ``spec_drafts``), ``spec_accepted`` and ``spec_invalid``.
    """

    ids: list[str] = field(default_factory=list)
    requests: list[Any] = field(default_factory=list)
    before: list[int] = field(default_factory=list)
    counts: list[int] = field(default_factory=list)
    tokens: list[Any] = field(default_factory=list)
    kept: list[int] = field(default_factory=list)
    spec_ids: list[str] = field(default_factory=list)
    spec_k: list[int] = field(default_factory=list)
    spec_drafts: list[Any] = field(default_factory=list)
    spec_accepted: list[Any] = field(default_factory=list)
    spec_invalid: list[int] = field(default_factory=list)

    def sample(self, rows: Any) -> None:
        """Copy the sampled rows end to end (vLLM trims its own lists after a stop)."""
        if hasattr(rows, "tolist"):  # one 2-d array (vLLM has sent numpy as well)
            rows = rows.tolist()
        elif any(row is None for row in rows):  # an empty row, as older releases meant it
            rows = [() if row is None else row for row in rows]
        self.counts = [len(row) for row in rows]
        self.tokens = list(chain.from_iterable(rows))

    def count(self, req_id: str, drafts: Any, accepted: Any, invalid: int) -> None:
        """vLLM counted a verification step of ``req_id``: appends only, no new list."""
        self.spec_ids.append(req_id)
        if drafts is None:
            self.spec_k.append(0)
        else:
            self.spec_k.append(len(drafts))
            self.spec_drafts.extend(drafts)
        self.spec_accepted.append(accepted)
        self.spec_invalid.append(invalid)

    def columns(self) -> dict[str, Any]:
        """The step line's ``cols`` (flat JSON lists)."""
        return {
            "r": self.ids,
            "b": self.before,
            "c": self.counts,
            "g": self.tokens,
            "n": self.kept,
            "s": self.spec_ids,
            "k": self.spec_k,
            "d": self.spec_drafts,
            "a": self.spec_accepted,
            "i": self.spec_invalid,
        }


def _split(flat: list[Any], counts: list[int]) -> list[list[Any]]:
    out, at = [], 0
    for n in counts:
        out.append(flat[at : at + n])
        at += n
    if at != len(flat):
        raise ValueError(f"{len(flat)} values but the counts add up to {at}")
    return out


def line_records(line: dict[str, Any]) -> list[dict[str, Any]]:
    """A step line's records, from either form: ``reqs`` (a list of records, written
    before 2026-12-03) or ``cols`` (the flat columns of :class:`StepSnapshot`).

    Columns become the same records the older form held: the sampled requests in the
    output's order (those with tokens kept or counted by vLLM), then the requests vLLM
    counted with no sampled tokens.
    """
    if "reqs" in line:
        records: list[dict[str, Any]] = line["reqs"]
        return records
    cols = line["cols"]
    drafts = _split(cols["d"], cols["k"])
    counted = {
        rid: (d, a, i) for rid, d, a, i in zip(cols["s"], drafts, cols["a"], cols["i"], strict=True)
    }
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    sampled = _split(cols["g"], cols["c"])
    for rid, b, g, n in zip(cols["r"], cols["b"], sampled, cols["n"], strict=True):
        if b < 0 or not g:  # unknown to the scheduler, or no sampled tokens
            continue
        seen.add(rid)
        record: dict[str, Any] = {"r": rid, "b": b, "g": g, "n": n}
        spec = counted.get(rid)
        if spec is not None:
            record["d"], record["a"], record["i"] = spec
        if n or spec is not None:
            out.append(record)
    for rid, (d, a, i) in counted.items():
        if rid not in seen:  # counted by vLLM with no sampled tokens (no sampler step)
            out.append({"r": rid, "b": None, "g": [], "n": 0, "d": d, "a": a, "i": i})
    return out
