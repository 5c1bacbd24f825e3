"""A scheduler step as columns: what the hook snapshots, and the records readers get.

The scheduler hook (:mod:`tokenlens.capture.plugin`) runs on vLLM's scheduler thread,
where every microsecond per request is taken from the engine: at a GPU batch of 256 a
step lasts 20-30 ms and the whole engine shares one GIL. So the hook only snapshots,
with list comprehensions, what changes once ``update_from_output`` returns (each
request's output length before, how many tokens vLLM kept, a copy of its sampled
tokens, the drafts vLLM counted), and the line holds those columns as they are: the
writer thread encodes lists of ints, with no Python loop per request (building one
dict per request there still cost 3 % of the step time at batch 256 on an H200,
taken from the scheduler through the GIL). Readers turn columns into records
(:func:`line_records`), the form step files held before.

A record (one step of one request; the step file's format, docs/capture.md):
``r`` request id, ``b`` output length before the step (``None``: no sampled tokens),
``g`` the sampled tokens, ``n`` how many of them vLLM kept, and, when vLLM counted a
verification step, ``d`` the drafts, ``a`` accepted, ``i`` invalid drafts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


def copy_ids(values: Any) -> list[Any]:
    """A copy of token ids from a list or a numpy array (vLLM has used both).

    Cheap on the scheduler's thread: a list is copied as it is (vLLM shortens its own
    list in place after a stop) and numpy scalars inside are turned into ints by the
    writer thread's JSON encoder (:mod:`tokenlens.capture.recorder`).
    """
    if type(values) is list:
        return values.copy()
    if hasattr(values, "tolist"):
        out: list[Any] = values.tolist()
        return out
    return list(values)


def copy_rows(rows: Any) -> list[Any]:
    """``copy_ids`` of every row, in one comprehension when every row is a plain list."""
    if all(type(row) is list for row in rows):
        return [row.copy() for row in rows]
    return [None if row is None else copy_ids(row) for row in rows]


@dataclass(slots=True)
class StepSnapshot:
    """What one ``update_from_output`` call left for its line (columns by request).

    ``ids``, ``requests``, ``before``, ``sampled`` and ``kept`` are parallel: the
    requests of the model's output in its order, vLLM's ``Request`` (``None``: unknown to
    the scheduler), the output length before the step (-1 when unknown), a copy of the
    sampled tokens and, once vLLM returned, how many of them it kept (then ``requests``
    is emptied: vLLM's objects stay on the scheduler's thread). ``spec`` holds, per
    request id vLLM counted, ``[drafts, accepted, invalid drafts]``.
    """

    ids: list[str] = field(default_factory=list)
    requests: list[Any] = field(default_factory=list)
    before: list[int] = field(default_factory=list)
    sampled: list[Any] = field(default_factory=list)
    kept: list[int] = field(default_factory=list)
    spec: dict[str, list[Any]] = field(default_factory=dict)

    def columns(self) -> dict[str, Any]:
        """The step line's ``cols`` (JSON lists: the writer encodes them without a loop)."""
        return {
            "r": self.ids,
            "b": self.before,
            "g": self.sampled,
            "n": self.kept,
            "s": self.spec,
        }


def line_records(line: dict[str, Any]) -> list[dict[str, Any]]:
    """A step line's records, from either form: ``reqs`` (a list of records, written
    before 2026-12-03) or ``cols`` (the columns of :class:`StepSnapshot`).

    Columns become the same records the older form held: the sampled requests in the
    output's order (those with tokens kept or counted by vLLM), then the requests vLLM
    counted with no sampled tokens.
    """
    if "reqs" in line:
        records: list[dict[str, Any]] = line["reqs"]
        return records
    cols = line["cols"]
    spec: dict[str, list[Any]] = cols["s"]
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for rid, b, g, n in zip(cols["r"], cols["b"], cols["g"], cols["n"], strict=True):
        if b < 0 or not g:  # unknown to the scheduler, or no sampled tokens
            continue
        seen.add(rid)
        record: dict[str, Any] = {"r": rid, "b": b, "g": g, "n": n}
        counted = spec.get(rid)
        if counted is not None:
            record["d"], record["a"], record["i"] = counted
        if n or counted is not None:
            out.append(record)
    for rid, counted in spec.items():
        if rid not in seen:  # counted by vLLM with no sampled tokens (no sampler step)
            drafts, accepted, invalid = counted
            out.append({"r": rid, "b": None, "g": [], "n": 0, "d": drafts, "a": accepted,
                        "i": invalid})  # fmt: skip
    return out
