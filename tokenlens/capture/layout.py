"""Where a process sits in vLLM's parallel layout, and which layouts are traced.

How vLLM lays a multi-GPU engine out (read in 0.32 and 0.34, ``vllm/v1/engine/core.py``,
``vllm/v1/executor``, ``vllm/distributed/parallel_state.py``):

- **Tensor parallelism** (``tensor_parallel_size`` = N): one engine core process runs the
  one scheduler; N worker processes (one per GPU) each run a model runner over the same
  batch. So the scheduler hook records each step once, and a worker-side recorder (the
  Model Runner V2 draft ids, the step timer) would record it N times: only the worker of
  tensor-parallel rank 0 (of prefill-context-parallel rank 0, on the last pipeline
  stage) writes. The rank is vLLM's own (``get_tp_group().rank_in_group`` and the pipeline
  and prefill-context groups), never inferred from a pid or a device number.
- **Data parallelism** (``data_parallel_size`` = M): M engine cores, each with its own
  scheduler and workers, behind one front end that sends each request to one core. Each
  core's hook writes its own files; the events are their union. For a dense model every
  core is reconfigured as an independent engine (``reconfigure_for_independent_dp_rank``:
  its ``data_parallel_size`` reads 1, its rank 0) and only ``data_parallel_index`` keeps
  which core it is; that is what is recorded. The front end's stat loggers keep one
  counter set per core (the Prometheus label ``engine``); tokenlens sums them.
- **Pipeline parallelism** is refused (:func:`refusal`): vLLM then keeps several
  batches in flight through its batch queue, an order of scheduling and reconciling
  that neither the scheduler-level suite nor any engine run here has exercised, so an
  exact trace is not claimed (vLLM 0.32's CPU build does not even start it with
  speculative decoding: its first stage's runner has no ``drafter``).

No vLLM import at module level; the plugin calls these inside vLLM's processes.
"""

from __future__ import annotations

from typing import Any

# ParallelConfig fields read (name in the manifest -> vLLM's field).
CONFIG_FIELDS = {
    "tensor": "tensor_parallel_size",
    "pipeline": "pipeline_parallel_size",
    "data": "data_parallel_size",
    "prefill_context": "prefill_context_parallel_size",
    "decode_context": "decode_context_parallel_size",
}
# vLLM's parallel-state groups a worker's ranks are read from (key -> getter).
RANK_GROUPS = {"tp": "get_tp_group", "pp": "get_pp_group", "pcp": "get_pcp_group"}
PARALLEL_STATE = "vllm.distributed.parallel_state"
# The status of a worker-side recorder on a rank that is not its engine's writer.
IDLE = "idle (not tensor-parallel rank 0 of the last pipeline stage)"


class LayoutUnknown(Exception):
    """This process's ranks could not be read from vLLM."""


def data_parallel_index(parallel: Any) -> int | None:
    """Which engine core of a data-parallel deployment this is (``data_parallel_index``,
    which vLLM keeps when it resets a dense model's core to ``data_parallel_rank`` 0)."""
    for name in ("data_parallel_index", "data_parallel_rank"):
        value = getattr(parallel, name, None)
        if isinstance(value, int):
            return value
    return None


def config_layout(parallel: Any) -> dict[str, Any]:
    """The sizes a ``ParallelConfig`` holds (null where this vLLM lacks the field) and
    the data-parallel index of the process that reads it."""
    out: dict[str, Any] = {}
    for key, name in CONFIG_FIELDS.items():
        value = getattr(parallel, name, None)
        out[key] = value if isinstance(value, int) else None
    out["data_index"] = data_parallel_index(parallel)
    return out


def refusal(layout: dict[str, Any]) -> str | None:
    """Why a layout cannot be traced exactly (one line), or None."""
    pipeline = layout.get("pipeline")
    if isinstance(pipeline, int) and pipeline > 1:
        return (
            f"pipeline parallelism (pipeline_parallel_size={pipeline}) is not traced: vLLM "
            "keeps several batches in flight, an order no tokenlens test has run; use "
            "tensor or data parallelism"
        )
    return None


def options_refusal(options: dict[str, Any]) -> str | None:
    """Why an in-process engine with these engine arguments cannot be traced, or None.

    Pipeline parallelism as :func:`refusal`; data parallelism because vLLM's ``LLM``
    itself refuses ``data_parallel_size`` > 1 (a data-parallel deployment is traced
    through ``vllm serve``, whose engine cores each record into the trace directory).
    """
    why = refusal({"pipeline": options.get("pipeline_parallel_size")})
    if why is None and isinstance(data := options.get("data_parallel_size"), int) and data > 1:
        why = (
            f"data_parallel_size={data}: vLLM's in-process LLM refuses data parallelism; "
            f"start `vllm serve MODEL --data-parallel-size {data}` with TOKENLENS_TRACE_DIR "
            "set and trace it with --server URL --server-trace-dir DIR"
        )
    return why


def worker_ranks() -> dict[str, int]:
    """This worker's ranks and group sizes from vLLM's parallel state.

    ``{"tp": r, "tp_size": n, "pp": .., "pp_size": .., "pcp": .., "pcp_size": ..}``; a
    group this vLLM does not have (no prefill context parallelism) is rank 0 of 1.
    Raises :class:`LayoutUnknown` when the state is not initialised or not readable.
    """
    import importlib

    try:
        state = importlib.import_module(PARALLEL_STATE)
    except Exception as exc:
        raise LayoutUnknown(f"{PARALLEL_STATE} not importable: {exc!r}") from None
    out: dict[str, int] = {}
    for key, getter in RANK_GROUPS.items():
        get = getattr(state, getter, None)
        if get is None and key == "pcp":
            out[key], out[f"{key}_size"] = 0, 1
            continue
        try:
            group = get()  # type: ignore[misc]
            out[key] = int(group.rank_in_group)
            out[f"{key}_size"] = int(group.world_size)
        except Exception as exc:
            raise LayoutUnknown(f"{PARALLEL_STATE}.{getter}() failed: {exc!r}") from None
    return out


def single_worker(layout: dict[str, Any]) -> bool:
    """Whether the config says each engine core has exactly one worker."""
    return (
        layout.get("tensor") == 1
        and layout.get("pipeline") == 1
        and layout.get("prefill_context") in (1, None)
    )


def runner_parallel_config(runner: Any) -> Any:
    """The ``ParallelConfig`` of a model runner or a scheduler (None where it has none)."""
    config = getattr(getattr(runner, "vllm_config", None), "parallel_config", None)
    return config if config is not None else getattr(runner, "parallel_config", None)


def writer_ranks(parallel: Any) -> tuple[bool | None, dict[str, Any]]:
    """(whether this worker is its engine's one writer, what decided it).

    The writer is tensor-parallel rank 0 of prefill-context rank 0 on the last pipeline
    stage. None: the ranks are unknown and the config says there are several workers:
    nothing may be written (each draft would be recorded once per rank).
    """
    layout = config_layout(parallel) if parallel is not None else {}
    try:
        ranks: dict[str, Any] = worker_ranks()
        source = PARALLEL_STATE
    except LayoutUnknown as exc:
        if not layout or not single_worker(layout):
            return None, {"problem": f"this worker's tensor-parallel rank is unknown ({exc})"}
        ranks, source = (
            {"tp": 0, "tp_size": 1, "pp": 0, "pp_size": 1, "pcp": 0, "pcp_size": 1},
            ("ParallelConfig: one worker per engine"),
        )
    writes = ranks["tp"] == 0 and ranks["pcp"] == 0 and ranks["pp"] == ranks["pp_size"] - 1
    return writes, {
        **ranks,
        "data_index": layout.get("data_index"),
        "rank_source": source,
    }
