"""Helpers shared by tests (importable as ``tests.support``).

Test modules import shared data and helpers from here (or get them as conftest
fixtures), never from one another.
"""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import io
import json
import os
import secrets
import shutil
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from tokenlens.bench_results import COLUMN_NAMES, Row, read_results, write_results
from tokenlens.capture.reconcile import reconcile
from tokenlens.engine.results import SpecCounters
from tokenlens.errors import TokenlensError
from tokenlens.rundir import Run

REPO = Path(__file__).resolve().parent.parent


def needs(module: str) -> pytest.MarkDecorator:
    """Skip unless ``module`` is importable: the fast suite also runs without vLLM,
    torch and transformers, with the newest core dependencies (scripts/test_newest.sh)."""
    return pytest.mark.skipif(
        importlib.util.find_spec(module) is None, reason=f"needs {module} (the vLLM set-up)"
    )


def write_prompts(path: Path, prompts: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(p, ensure_ascii=False) + "\n" for p in prompts), "utf-8")
    return path


def japanese_share(text: str) -> float:
    """Share of kana/kanji among non-space characters."""
    chars = [c for c in text if not c.isspace()]
    ja = [c for c in chars if "\u3040" <= c <= "\u30ff" or "\u4e00" <= c <= "\u9fff"]
    return len(ja) / max(1, len(chars))


def ascii_share(text: str) -> float:
    chars = [c for c in text if not c.isspace()]
    return sum(c.isascii() for c in chars) / max(1, len(chars))


def check_events(run: Run) -> None:
    """The contract's invariant against vLLM's counters, and the token identities."""
    assert run.events is not None
    assert reconcile(run.events, run.metrics) == []
    outputs = {r["request_id"]: r["output_token_ids"] for r in run.requests.to_pylist()}
    judged = 0
    for ev in run.events.to_pylist():
        assert ev["request_id"] in outputs
        if ev["accepted"]:
            assert ev["emitted_token_id"] == ev["draft_token_id"]
        if ev["output_index"] is not None:
            assert outputs[ev["request_id"]][ev["output_index"]] == ev["emitted_token_id"]
            judged += 1
    assert judged > 0


REAL_RUN = REPO / "tests" / "data" / "run-dm3"
"""A real traced run (embedded pair, draft model k=3, float32, --cap-tokens 24: two demo
prompts that stop at the length and two one-word answers that stop at the end of turn)
with its capture directory: step files, the worker's request-id map and finished records."""


def copy_run(dest: Path, source: Path = REAL_RUN) -> Path:
    shutil.copytree(source, dest)
    return dest


PER_TOKEN = ("token_logprob", "token_rank", "top_ids", "top_logprobs")
"""requests.parquet's columns with one value per output token (besides the ids)."""


def cut_after_first_step(run: Path, only: str | None = None) -> Path:
    """The run directory ``run`` (qwen2.5 ids) with its requests (``only`` that one)
    cut after their first verification step: their later events gone, their output
    ids, text and per-token columns cut to what those events cover, the counters
    recomputed from the events (a consistent, shorter run)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from tokenlens.capture.reconcile import counters_from_events
    from tokenlens.text import load_tokenizer
    from tokenlens.text.detokenize import decode_output

    events = pq.read_table(run / "events.parquet")
    first = pc.equal(events["step"], 0)
    if only is not None:
        first = pc.or_(pc.not_equal(events["request_id"], only), first)
    events = events.filter(first)
    pq.write_table(events, run / "events.parquet")
    (run / "metrics.json").write_text(json.dumps(counters_from_events(events).to_json()))
    ends: dict[str, int] = {}
    for rid, index in zip(
        events["request_id"].to_pylist(), events["output_index"].to_pylist(), strict=True
    ):
        if index is not None:
            ends[rid] = max(ends.get(rid, 0), index + 1)
    requests = pq.read_table(run / "requests.parquet")
    vocab = load_tokenizer("qwen2.5")
    cut = [only is None or rid == only for rid in requests["request_id"].to_pylist()]
    end = [ends.get(rid, 1) for rid in requests["request_id"].to_pylist()]

    def shorten(values: list[Any]) -> list[Any]:
        return [
            v[:e] if c and v is not None else v for v, c, e in zip(values, cut, end, strict=True)
        ]

    ids = shorten(requests["output_token_ids"].to_pylist())
    texts = [
        decode_output(vocab, row) if c else text
        for row, c, text in zip(ids, cut, requests["output_text"].to_pylist(), strict=True)
    ]
    columns = {name: shorten(requests[name].to_pylist()) for name in PER_TOKEN}
    for name, values in (("output_token_ids", ids), ("output_text", texts), *columns.items()):
        index = requests.schema.get_field_index(name)
        field = requests.schema.field(index)
        requests = requests.set_column(index, field, pa.array(values, field.type))
    pq.write_table(requests, run / "requests.parquet")
    return run


def cli(argv: list[str], start: Any = None) -> tuple[int, str, str]:
    """The real ``tokenlens.cli.main`` in-process: (exit status, stdout, stderr); ``start``
    makes trace's engines (a :class:`FakeVllm`; default: vLLM's)."""
    from tokenlens.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main(argv, start)
        except SystemExit as exc:  # argparse: --help, usage errors
            status = exc.code if isinstance(exc.code, int) else 1
    return status, out.getvalue(), err.getvalue()


def assert_one_line_error(status: int, stderr: str, *needles: str) -> None:
    """Non-zero exit, exactly one line on stderr, no traceback, and every needle in it."""
    assert status != 0, stderr
    assert stderr.count("\n") == 1 and stderr.endswith("\n"), stderr
    assert "Traceback" not in stderr, stderr
    for needle in needles:
        assert needle in stderr, stderr


def process_gone(pid: int) -> bool:
    """True when ``pid`` no longer runs (absent, or a zombie nobody reaped yet)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


def first_divergence(a: Sequence[int], b: Sequence[int]) -> int | None:
    """The first index where two token sequences differ (the shorter one's length when
    one is a prefix of the other), or None when they are equal."""
    if list(a) == list(b):
        return None
    return next(
        (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b))
    )


# --- untrusted text -----------------------------------------------------------------------

# Each string attacks one place text enters a page or a Markdown file; U+2028/U+2029 end
# lines in older JavaScript parsers, "<!--" changes the HTML parser's state inside
# <script>.
PAYLOADS = (
    "<script>document.title='PWNED'</script>",
    "</script><script>window.__pwned=1</script>",
    '"><img src=x onerror="window.__pwned=2">',
    "</textarea><b id=pwn>bold</b>",
    "line\u2028sep\u2029end",
    "<!--<script>window.__pwned=3</script>",
)


class _Page(HTMLParser):
    """The elements and the text of a page, as an HTML parser (a browser) reads them."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self._skip = 0  # inside <script> or <style>

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag in ("script", "style"):
            self._skip += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style"):
            self._skip -= 1

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self.text.append(data)


def parse_page(html: str) -> tuple[list[tuple[str, dict[str, str | None]]], str]:
    """(elements with their attributes, visible text) of an HTML page."""
    page = _Page()
    page.feed(html)
    page.close()
    return page.tags, "".join(page.text)


# --- a synthetic bench --------------------------------------------------------------------

BENCH: dict[str, Any] = {
    "signature": "tokenlens:0.1.0|vllm:0.32.0|plan:ja-en-speed@0123abcd",
    "tokenlens_version": "0.1.0",
    "vllm_version": "0.32.0",
    "plan": {"name": "ja-en speed", "description": "MTP vs n-gram on the embedded pair"},
    "plan_sha256": "0123abcd",
    "created_at": "2026-01-02T03:04:05Z",
    "server": None,
    "cases_total": 12,
    "cases_done": 11,
}

WIKI = {"dtype": "bfloat16", "quantization": None, "corpus": "wiki", "length": "short"}
NEWS = {"dtype": "float16", "quantization": "awq", "corpus": "news", "length": "long"}
NGRAM = {"method_label": "ngram", "method": "ngram", "k": 3}
MTP = {"method_label": "mtp", "method": "mtp", "k": 2}
BASE = {"method_label": "baseline", "method": "none", "k": 0}


def bench_case(
    case_id: str, group: dict[str, Any], method: dict[str, Any], lang: str, **values: Any
) -> Row:
    """One results row: the given values, plausible defaults for the rest."""
    row: Row = dict.fromkeys(COLUMN_NAMES)
    row.update(
        case_id=case_id,
        model="qwen3-0.6b",
        model_path="/models/qwen3-0.6b",
        lang=lang,
        prompts=8,
        warmup=1,
        repeats=3,
        concurrency=1,
        output_tokens=1024,
        output_chars=1536 if lang != "en" else 4096,
        output_bytes=4608 if lang != "en" else 4096,
        ttft_s=0.25,
        wall_s=40.0,
        run_dir=f"runs/{case_id}",
        signature=f"tokenlens:0.1.0|case:{case_id}",
        **group,
        **method,
    )
    if method["method"] != "none":
        row.update(num_drafts=300, num_draft_tokens=300 * method["k"], num_accepted_tokens=200)
    row.update(values)
    return row


# case id, setup, method, lang, tok/s and chars/s as "median min max" (only a median:
# no range), acceptance rate, acceptance per position. Plan order, baselines not first.
# Two groups: wiki/short has a baseline and two methods (ngram k=3, mtp k=2) in Japanese
# and English; news/long lacks the English baseline, has Chinese as a third language,
# and one case without per-position acceptance.
SYNTHETIC: tuple[tuple[Any, ...], ...] = (
    # wiki/short: a baseline and two methods in ja and en; c04 had one repeat
    ("c03", WIKI, NGRAM, "ja", "22.0 21.5 22.3", "33.0 32.3 33.4", 0.2, [0.3, 0.2, 0.1]),
    ("c04", WIKI, NGRAM, "en", "35.0 35.0 35.0", "140.0 140.0 140.0", 0.4, [0.6, 0.4, 0.2]),
    ("c01", WIKI, BASE, "ja", "20.0 19.5 20.4", "30.0 29.2 30.6", None, None),
    ("c02", WIKI, BASE, "en", "25.0 24.6 25.3", "100.0 98.4 101.2", None, None),
    ("c05", WIKI, MTP, "ja", "31.2 30.9 31.6", "46.8 46.4 47.4", 0.36, [0.5, 0.22]),
    ("c06", WIKI, MTP, "en", "45.0 44.1 45.9", "180.0 176.4 183.6", 0.5, [0.65, 0.35]),
    # news/long: no English baseline, Chinese as a third language
    ("d03", NEWS, MTP, "ja", "27.0 26.0 27.9", "40.5 39.0 41.9", 0.3, [0.42, 0.18]),
    ("d01", NEWS, BASE, "ja", "18.0 17.0 18.5", "27.0 25.5 27.8", None, None),
    ("d04", NEWS, MTP, "en", "40.0", "164.0", 0.45, None),
    ("d02", NEWS, BASE, "zh", "19.0 18.8 19.1", "26.6 26.3 26.7", None, None),
    ("d05", NEWS, MTP, "zh", "28.5 28.0 29.0", "39.9 39.2 40.6", 0.33, [0.45, 0.21]),
)


def synthetic_rows() -> list[Row]:
    """:data:`SYNTHETIC` as results rows, speedups against the baseline of the same
    setup and language as the bench computes them (none without that baseline)."""
    rows = []
    for case_id, setup, method, lang, tok, chars, acc, per_position in SYNTHETIC:
        row = bench_case(case_id, setup, method, lang, acceptance_rate=acc)
        row["acceptance_per_position"] = per_position
        for column, stats in (("tok_s", tok), ("chars_s", chars)):
            names = (column, column + "_min", column + "_max")
            row.update(zip(names, map(float, stats.split()), strict=False))
        rows.append(row)
    for row in rows:
        base = [b for b in rows if b["method"] == "none" and b["lang"] == row["lang"]]
        base = [b for b in base if b["corpus"] == row["corpus"]]
        if base:
            row["baseline_case_id"] = base[0]["case_id"]
            row["speedup_tok_s"] = row["tok_s"] / base[0]["tok_s"]
            row["speedup_chars_s"] = row["chars_s"] / base[0]["chars_s"]
    return rows


def roundtrip(rows: list[Row], tmp_path: Path) -> list[Row]:
    """The rows as read back from a results.csv."""
    path = tmp_path / "results.csv"
    write_results(path, rows)
    return read_results(path)


def write_bench(root: Path, rows: list[Row], bench: dict[str, Any] | None = BENCH) -> Path:
    """A bench directory as ``tokenlens bench`` leaves it (results.csv, bench.json)."""
    root.mkdir(parents=True, exist_ok=True)
    write_results(root / "results.csv", rows)
    if bench is not None:
        (root / "bench.json").write_text(json.dumps(bench, ensure_ascii=False), "utf-8")
    return root


def poisoned_bench(root: Path) -> Path:
    """The synthetic bench with attack strings wherever a plan puts text: the n-gram
    method's label, the wiki corpus name, a model and a draft model name, the plan's
    name and description, and the bench signature."""
    rows = synthetic_rows()
    for row in rows:
        if row["method_label"] == "ngram":
            row["method_label"] = PAYLOADS[1]
            row["draft_model"] = PAYLOADS[5]
        if row["corpus"] == "wiki":
            row["corpus"] = PAYLOADS[2]
        else:
            row["model"] = PAYLOADS[3]
    plan = {"name": PAYLOADS[0], "description": " ".join(PAYLOADS)}
    return write_bench(root, rows, dict(BENCH, plan=plan, signature=PAYLOADS[4]))


# --- a bench plan ---------------------------------------------------------------------------

PLAN = """
[bench]
warmup = 1
repeats = 2

[[model]]
name = "m"
path = "some/model"

[[method]]
name = "baseline"
method = "none"

[[method]]
name = "ng"
method = "ngram"
k = [1, 3]

[[corpus]]
name = "c"
path = "prompts.jsonl"
"""


def write_plan(tmp_path: Path, text: str = PLAN) -> Path:
    """``text`` as tmp_path/plan.toml beside the four prompts its corpus names."""
    write_prompts(
        tmp_path / "prompts.jsonl",
        [
            {"id": "a-ja", "lang": "ja", "text": "こんにちは", "tags": {"length": "medium"}},
            {"id": "a-en", "lang": "en", "text": "hello", "tags": {"length": "medium"}},
            {"id": "b-ja", "lang": "ja", "text": "さようなら", "tags": {"length": "long"}},
            {"id": "b-en", "lang": "en", "text": "goodbye", "tags": {"length": "long"}},
        ],
    )
    path = tmp_path / "plan.toml"
    path.write_text(text, encoding="utf-8")
    return path


# --- a fake vLLM: trace's, bench's and replay's control flow without an engine --------------

FAKE_EOS = 151645  # <|im_end|>: the toy target stops on it, as Qwen does
_TOY = 40  # toy tokens are ids 100 .. 139 of the Qwen2.5 vocabulary (plain ASCII pieces); so
# few that outputs repeat themselves and the n-gram drafter finds matches


def toy_target(seq: Sequence[int]) -> int:
    """The fake target's greedy next token after ``seq`` (EOS about one time in 41)."""
    if (seq[-1] + len(seq)) % 41 == 0:
        return FAKE_EOS
    before = seq[-2] if len(seq) > 1 else 0
    return 100 + (seq[-1] * 31 + before * 17 + len(seq)) % _TOY


def toy_drafter(seq: Sequence[int]) -> int:
    """The fake drafter: the target's token, except at about one position in four."""
    token = toy_target(seq)
    return token + 1 if (seq[-1] + 3 * len(seq)) % 4 == 0 else token


def toy_ngram(seq: Sequence[int], k: int, low: int = 1, high: int = 4) -> list[int]:
    """A prompt-lookup proposal: the tokens after the latest earlier match of the longest
    suffix of ``seq`` (``high`` down to ``low`` tokens); none without a match."""
    for n in range(min(high, len(seq) - 1), low - 1, -1):
        suffix = list(seq[-n:])
        for i in range(len(seq) - n - 1, -1, -1):
            if list(seq[i : i + n]) == suffix:
                return list(seq[i + n : i + n + k])
    return []


def toy_prompt_ids(job: Any) -> tuple[int, ...]:
    """Prompt token ids of a job: toy ids from its text, then "<|im_start|>assistant\\n"."""
    text = job.text or " ".join(str(m["content"]) for m in job.messages or ())
    return (*(100 + (ord(c) * 7) % _TOY for c in text[:40]), 151644, 77091, 198)


@dataclass
class _Request:
    """One request of the fake engine, stepped one scheduler step at a time."""

    job: Any
    internal: str
    prompt: tuple[int, ...]
    max_tokens: int
    ignore_eos: bool
    out: list[int] = field(default_factory=list)

    def done(self) -> bool:
        stop = bool(self.out) and self.out[-1] == FAKE_EOS and not self.ignore_eos
        return len(self.out) >= self.max_tokens or stop


class FakeEngine:
    """A :class:`~tokenlens.engine.backend.Backend` (and replay worker) without vLLM.

    It generates with :func:`toy_target`, drafts with :func:`toy_drafter` or
    :func:`toy_ngram`, and writes what vLLM's worker and the tokenlens plugin write in a
    trace directory (step files in the plugin's format, ``submitted-``/``finished-``
    records, a capture status), so everything after the engine is the real code. Its
    counters are those of its steps, as vLLM's are. :class:`FakeVllm` makes one per start.
    """

    def __init__(
        self, vllm: FakeVllm, config: Any, log_path: Path, progress: Any, index: int
    ) -> None:
        self.vllm, self.config, self.log_path, self.progress = vllm, config, log_path, progress
        self.index = index  # how many engines this FakeVllm started before this one
        self.info: dict[str, Any] = {}
        self.total = SpecCounters()
        self.finished = 0
        self.timer: Any = None  # the step timer's recorder, once a step is timed

    def __enter__(self) -> FakeEngine:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.log_path.write_text("fake engine\n", encoding="utf-8")
        if self.index in self.vllm.fail_start:
            raise TokenlensError(f"the vLLM engine failed to start (fake); see {self.log_path}")
        self.vllm.started.append(self.config)
        self.info = {
            "dtype": "float32",
            "vllm_version": FAKE_VLLM_VERSION,
            "engine": self._facts(),
        }
        return self

    def _facts(self) -> dict[str, Any]:
        """Runner and async scheduling as vLLM's CPU build resolves them (V1, async off),
        or with ``FakeVllm.gpu_runners`` as vLLM 0.25 does on a GPU: V2 with async
        scheduling unless speculative (n-gram, draft model: V1, async off) or forced by
        ``VLLM_USE_V2_MODEL_RUNNER=0`` / ``async_scheduling=false``."""
        if not self.vllm.gpu_runners:
            return {"model_runner": "V1", "async_scheduling": False}
        spec = self.config.speculative is not None
        v1 = spec or self.config.env.get("VLLM_USE_V2_MODEL_RUNNER") == "0"
        is_async = not spec and bool(self.config.extra.get("async_scheduling", True))
        return {"model_runner": "V1" if v1 else "V2", "async_scheduling": is_async}

    def _time_step(self, records: list[dict[str, Any]]) -> None:
        """The step timer's line for one fake step (its format, fixed made-up times):
        a target step takes 10 ms, each drafted token 4 ms (c = 0.4)."""
        from tokenlens.capture.recorder import StepRecorder
        from tokenlens.capture.step_timer import TIMES_PREFIX

        if not self.config.trace_dir or "TOKENLENS_STEP_TIMER" not in self.config.env:
            return
        sd = sum(len(r.get("d", [])) for r in records)
        k = self.config.speculative.num_speculative_tokens if self.config.speculative else 0
        prefill = any(r["b"] == 0 for r in records)
        drafting = 0.004 * k if k else None
        record = {
            "s": 0.010 + (drafting or 0.0), "d": drafting, "src": "cpu",
            "tok": len(records) + sd + (5 if prefill else 0), "r": len(records), "sd": sd,
            "o": 2e-5,
        }  # fmt: skip
        if self.timer is None:
            self.timer = StepRecorder(self.config.trace_dir, background=False, prefix=TIMES_PREFIX)
        self.timer.write_step([record])

    def __exit__(self, *exc: object) -> None:
        if self.timer is not None:
            self.timer.close()

    def version(self) -> str:
        return FAKE_VLLM_VERSION

    def counters(self) -> SpecCounters:
        return self.total

    def _model(self, path: str) -> Any:
        return toy_drafter if Path(path).name == self.vllm.drafter else toy_target

    # -- Backend ---------------------------------------------------------------------
    def generate(self, jobs: list[Any], sampling: Any, concurrency: int = 1) -> Any:
        from tokenlens.capture.recorder import StepRecorder, write_status
        from tokenlens.engine.results import GeneratedRequest, GenerationResult

        trace_dir = self.config.trace_dir
        recorder = StepRecorder(trace_dir, background=False) if trace_dir else None
        if trace_dir:
            write_status(trace_dir, {**FAKE_STATUS, "pid": os.getpid()})
        pending = [
            _Request(
                job,
                f"{job.rid}-{secrets.token_hex(4)}",
                toy_prompt_ids(job),
                job.max_tokens or sampling.max_tokens,
                sampling.ignore_eos,
            )
            for job in jobs
        ]
        pending.reverse()
        running: list[_Request] = []
        done: dict[str, GeneratedRequest] = {}
        before = self.total
        started_at = time.time()
        t0 = time.perf_counter()
        held: list[dict[str, Any]] | None = None  # the last step, while ``lag`` holds it
        while pending or running:
            while pending and len(running) < max(1, concurrency):
                req = pending.pop()
                running.append(req)
                self._append(trace_dir, "submitted", [
                    {"internal": req.internal, "request_id": req.job.rid,
                     "prompt_id": req.job.prompt_id}
                ])  # fmt: skip
            records = [self._step(req) for req in running]
            if recorder is not None:
                if held is not None:
                    recorder.write_step(held)
                held = records if self.vllm.lag else None
                if held is None:
                    recorder.write_step(records)
                self._time_step(records)
            for req in [r for r in running if r.done()]:
                running.remove(req)
                done[req.job.rid] = self._result(req, sampling)
                self._append(trace_dir, "finished", [asdict(done[req.job.rid])])
                self.progress.advance(1)
                self.finished += 1
            if self.vllm.during is not None:
                during, self.vllm.during = self.vllm.during, None
                during()
            dies = self.vllm.die_after.get(self.index)
            if dies is not None and self.finished >= dies and running:
                raise self.vllm.death(f"the vLLM engine died (fake); see {self.log_path}")
        if recorder is not None and held is not None:  # as vLLM's writer thread, later
            threading.Timer(self.vllm.lag, recorder.write_step, [held]).start()
        return GenerationResult(
            requests=tuple(done[job.rid] for job in jobs),
            wall_seconds=max(time.perf_counter() - t0, 1e-6),
            counters=self.total - before,
            vllm_version=FAKE_VLLM_VERSION,
            info={"num_preemptions": 0, "started_at": started_at, "ended_at": time.time()},
        )

    def _step(self, req: _Request) -> dict[str, Any]:
        """One scheduler step of ``req``: its record as the plugin writes it."""
        seq = [*req.prompt, *req.out]
        spec = self.config.speculative
        if not req.out:  # prefill: output token 0, no drafts
            req.out.append(toy_target(seq))
            return {"r": req.internal, "b": 0, "g": req.out[:1], "n": 1}
        drafts: list[int] = []
        if spec is not None and spec.method == "ngram":
            drafts = toy_ngram(seq, spec.num_speculative_tokens)
        elif spec is not None:
            draft = self._model(spec.model)
            for _ in range(spec.num_speculative_tokens):
                drafts.append(draft([*seq, *drafts]))
        sampled: list[int] = []
        for j, token in enumerate(drafts):
            sampled.append(toy_target([*seq, *drafts[:j]]))
            if sampled[-1] != token:
                break
        else:
            sampled.append(toy_target([*seq, *drafts]))  # every draft accepted: the bonus
        base = len(req.out)
        for token in sampled:  # appended one by one until a stop
            req.out.append(token)
            if req.done():
                break
        record = {"r": req.internal, "b": base, "g": sampled, "n": len(req.out) - base}
        if drafts:
            accepted = len(sampled) - 1
            width = spec.num_speculative_tokens
            per_position = tuple(int(j < accepted) for j in range(width))
            self.total = self.total + SpecCounters(1, len(drafts), accepted, per_position)
            record |= {"d": drafts, "a": accepted, "i": 0}
        return record

    def _result(self, req: _Request, sampling: Any) -> Any:
        from tokenlens.engine.results import GeneratedRequest, TokenLogprobs
        from tokenlens.text import load_tokenizer

        pieces = load_tokenizer("qwen2.5").pieces([t for t in req.out if t != FAKE_EOS])
        logprobs = None
        if sampling.logprobs:
            n = sampling.logprobs
            logprobs = tuple(
                TokenLogprobs(
                    -0.25, 1, (t, *range(1, n)), (-0.25, *(-3.0 - i for i in range(1, n)))
                )
                for t in req.out
            )
        stop = req.out[-1] == FAKE_EOS and not sampling.ignore_eos
        return GeneratedRequest(
            prompt_id=req.job.rid,
            vllm_request_id=req.internal,
            prompt_token_count=len(req.prompt),
            output_token_ids=tuple(req.out),
            output_text=b"".join(pieces).decode("utf-8", "replace"),
            finish_reason="stop" if stop else "length",
            logprobs=logprobs,
            first_token_latency=0.01,
            prompt_token_ids=req.prompt,
        )

    @staticmethod
    def _append(trace_dir: str | None, kind: str, lines: list[dict[str, Any]]) -> None:
        if not trace_dir:
            return
        Path(trace_dir).mkdir(parents=True, exist_ok=True)
        with (Path(trace_dir) / f"{kind}-{os.getpid()}.jsonl").open("a", encoding="utf-8") as f:
            f.writelines(json.dumps(line, ensure_ascii=False) + "\n" for line in lines)

    # -- replay's worker (Engine.call) -------------------------------------------------
    def call(self, operation: str, *args: Any) -> Any:
        from tokenlens.engine import passes

        if operation == passes.NGRAM:
            return self._ngram(args[0])
        assert operation == passes.GREEDY, operation
        model = self._model(self.config.model)
        results = []
        for req in args[0]:
            seq = list(req.tokens)
            argmax = [-1] + [model(seq[:i]) for i in range(1, len(seq))] if req.score_prompt else []
            generated: list[int] = []
            for _ in range(req.max_tokens):
                generated.append(model([*seq, *generated]))
            results.append(
                passes.PassResult(
                    argmax=tuple(argmax),
                    margin=tuple([float("nan")] + [1.0] * (len(argmax) - 1)) if argmax else (),
                    generated=tuple(generated),
                    generated_margin=(1.0,) * len(generated),
                )
            )
            self.progress.advance(1)
        return results

    @staticmethod
    def _ngram(payload: dict[str, Any]) -> list[list[list[int]]]:
        settings = payload["settings"]
        out = []
        for seq in payload["sequences"]:
            tokens, prompt_len = seq["tokens"], seq["prompt_len"]
            out.append(
                [[]]
                + [
                    toy_ngram(tokens[: prompt_len + n], settings["k"])
                    for n in range(1, len(tokens) - prompt_len)
                ]
            )
        return out


FAKE_VLLM_VERSION = "0.32.0"
FAKE_STATUS = {
    "state": "recording",
    "scheduler_class": "FakeScheduler",
    "tier": "verified",
    "tier_note": "a fake engine (tests/support.py)",
    "vllm_version": FAKE_VLLM_VERSION,
    "fingerprint": None,
    "async_scheduling": False,
    "per_request_metrics": None,
}


@dataclass
class FakeVllm:
    """Starts :class:`FakeEngine`s: pass it as ``start`` to run_trace, resume_trace,
    run_bench or run_replay. ``started`` lists the engine config of every engine that
    started; ``die_after`` maps a start (0 = the first) to how many requests it finishes
    before it dies, raising ``death`` (a TokenlensError; KeyboardInterrupt for Ctrl-C);
    ``fail_start`` lists the starts that fail at once; ``during`` is called once, after the
    first step an engine generates (another process acting meanwhile). ``drafter`` names
    the model directory that drafts with :func:`toy_drafter` (every other one is the
    toy target)."""

    die_after: dict[int, int] = field(default_factory=dict)
    fail_start: set[int] = field(default_factory=set)
    death: Callable[[str], BaseException] = TokenlensError
    during: Callable[[], None] | None = None
    drafter: str = "tiny-mimo-mtp"
    started: list[Any] = field(default_factory=list)
    gpu_runners: bool = False  # resolve runners as vLLM 0.25 on a GPU (FakeEngine._facts)
    lag: float = 0.0  # seconds after generate returns that its last step reaches the file
    made: int = 0

    def __call__(self, config: Any, log_path: Path, progress: Any) -> FakeEngine:
        engine = FakeEngine(self, config, log_path, progress, self.made)
        self.made += 1
        return engine


@dataclass
class RecordingProgress:
    """A :class:`~tokenlens.progress.Progress` that keeps what it was told."""

    stages: list[tuple[str, float | None]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    advanced: float = 0

    def stage(self, name: str, total: float | None = None, unit: str = "it") -> None:
        self.stages.append((name, total))

    def advance(self, amount: float = 1) -> None:
        self.advanced += amount

    def note(self, message: str) -> None:
        self.notes.append(message)

    def close(self) -> None:
        pass


def docstring_ids(tree: ast.AST) -> set[int]:
    """ids of the docstring constants of a module, its classes and functions (the code
    readers of test_architecture and test_dead_code skip them: prose names nothing)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.add(id(body[0].value))
    return out
