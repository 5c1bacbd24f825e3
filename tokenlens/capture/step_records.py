"""A scheduler step's records, built on the writer thread from what the hook snapshotted.

The scheduler hook (:mod:`tokenlens.capture.plugin`) runs on vLLM's scheduler thread,
where every microsecond per request is taken from the engine: at a GPU batch of 256 a
step lasts a few milliseconds. So the hook only snapshots, with list comprehensions, what
changes once ``update_from_output`` returns (each request's output length before and
after, a copy of its sampled tokens, the drafts vLLM counted), and the step's records,
one dict per request, are made here, later, on the recorder's writer thread
(:meth:`tokenlens.capture.recorder.StepRecorder.write_lazy`), off the critical path.

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
    """What one ``update_from_output`` call left for its records (columns by request).

    ``ids``, ``requests``, ``before`` and ``sampled`` are parallel: the requests of the
    model's output in its order, vLLM's ``Request`` (``None``: unknown to the
    scheduler), the output length before the step (-1 when unknown) and a copy of the
    sampled tokens. ``after`` is filled once vLLM returned (then ``requests`` is
    emptied: vLLM's objects stay on the scheduler's thread). ``spec`` holds, per request
    id, what vLLM counted: (drafts, accepted, the step's invalid-drafts mapping).
    """

    ids: list[str] = field(default_factory=list)
    requests: list[Any] = field(default_factory=list)
    before: list[int] = field(default_factory=list)
    sampled: list[Any] = field(default_factory=list)
    after: list[int] = field(default_factory=list)
    spec: dict[str, tuple[list[Any], Any, Any]] = field(default_factory=dict)

    def kept(self) -> list[int]:
        """Tokens vLLM kept per request (after minus before; 0 when unknown)."""
        return [a - b for a, b in zip(self.after, self.before, strict=True)]

    def records(self) -> list[dict[str, Any]]:
        """The step's records: sampled requests in the output's order, then counted-only."""
        out: list[dict[str, Any]] = []
        seen: set[str] = set()
        spec = self.spec
        for rid, b, a, g in zip(self.ids, self.before, self.after, self.sampled, strict=True):
            if b < 0 or not g:  # b < 0: a request the scheduler did not know
                continue  # no sampled tokens: at most a counted-only record, below
            seen.add(rid)
            record: dict[str, Any] = {"r": rid, "b": b, "g": g, "n": a - b}
            counted = spec.get(rid)
            if counted is not None:
                _counted(record, rid, counted)
            if record["n"] or counted is not None:
                out.append(record)
        for rid, counted in spec.items():
            if rid not in seen:  # counted by vLLM with no sampled tokens (no sampler step)
                record = {"r": rid, "b": None, "g": [], "n": 0}
                _counted(record, rid, counted)
                out.append(record)
        return out


def _counted(record: dict[str, Any], rid: str, counted: tuple[list[Any], Any, Any]) -> None:
    drafts, accepted, invalid = counted
    record["d"] = drafts
    record["a"] = int(accepted)
    record["i"] = int((invalid or {}).get(rid, 0))
