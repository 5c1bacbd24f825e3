"""`trace --server` against servers that hang or answer garbage: one line, never a hang
or a traceback (issue 25), and never a `complete` run from an answer that is not whole
(issue 33). Real sockets on loopback, no vLLM.

- a socket that accepts connections and never answers (the kernel completes the
  handshake for a listening socket nobody reads): the metadata timeout ends the trace;
- a server that answers every path with an HTML page (a proxy's login page);
- a server whose metadata is right but whose /metrics is not Prometheus text, or whose
  generation goes silent, or streams something that is not JSON.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tests.support import (
    REPO,
    FakeEngine,
    FakeVllm,
    assert_one_line_error,
    check_events,
    cli,
    write_prompts,
)
from tokenlens.engine.config import EngineConfig, PromptJob, SamplingConfig, SpeculativeSpec
from tokenlens.engine.results import ACCEPTED_PER_POS, NUM_ACCEPTED, NUM_DRAFT_TOKENS, NUM_DRAFTS
from tokenlens.engine.server import METADATA_TIMEOUT, ServerTimeouts
from tokenlens.progress import SILENT
from tokenlens.rundir import read_run

PROMPTS = [
    {"id": "ja", "lang": "ja", "pair": "p", "text": "桜について一文で説明してください。"},
    {"id": "en", "lang": "en", "pair": "p", "text": "Explain cherry blossoms in one sentence."},
]
METRICS = "# TYPE vllm:spec_decode_num_drafts counter\nvllm:spec_decode_num_drafts_total 0.0\n"


def trace(url: str, tmp_path: Path, *extra: str) -> list[str]:
    prompts = write_prompts(tmp_path / "p.jsonl", PROMPTS)
    traces = tmp_path / "traces"
    traces.mkdir(exist_ok=True)
    return [
        "trace",
        "--prompts",
        str(prompts),
        "--server",
        url,
        "--server-trace-dir",
        str(traces),
        "--method",
        "ngram",
        "--out",
        str(tmp_path / "run"),
        "--quiet",
        *extra,
    ]


@pytest.fixture
def silent_socket() -> Iterator[str]:
    """A listening socket that never accepts and never answers."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"


Handler = Callable[[BaseHTTPRequestHandler], None]


@pytest.fixture
def serve() -> Iterator[Callable[[Handler], str]]:
    """Start an HTTP server on loopback whose every request is answered by ``handler``."""
    servers: list[_Quiet] = []

    def start(handler: Handler) -> str:
        class Answer(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                handler(self)

            do_POST = do_GET

            def log_message(self, *args: object) -> None:
                pass

        server = _Quiet(("127.0.0.1", 0), Answer)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()
    failures = [e for server in servers for e in server.failures]
    assert not failures, failures  # a handler that broke for another reason than a hang-up


class _Quiet(ThreadingHTTPServer):
    """A test server whose handler errors never reach stderr: socketserver prints them to
    ``sys.stderr``, which ``cli`` captures as the command's (a client that hangs up, as
    these tests provoke, became a second line). Hang-ups are expected; anything else
    fails the test at teardown."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.failures: list[str] = []

    def handle_error(self, request: Any, client_address: Any) -> None:
        exc = sys.exc_info()[1]
        if not isinstance(exc, ConnectionError):
            self.failures.append(repr(exc))


def reply(request: BaseHTTPRequestHandler, body: str, kind: str = "application/json") -> None:
    data = body.encode()
    request.send_response(200)
    request.send_header("Content-Type", kind)
    request.send_header("Content-Length", str(len(data)))
    request.end_headers()
    request.wfile.write(data)


def metadata(request: BaseHTTPRequestHandler) -> bool:
    """Answer /v1/models, /version and /metrics as vLLM does; False for other paths."""
    if request.path == "/v1/models":
        reply(request, json.dumps({"data": [{"id": "served-model"}]}))
    elif request.path == "/version":
        reply(request, json.dumps({"version": "0.32.0"}))
    elif request.path == "/metrics":
        reply(request, METRICS, "text/plain")
    else:
        return False
    return True


def test_a_silent_server_ends_the_trace_with_one_line(silent_socket: str, tmp_path: Path) -> None:
    """Probe: the client waited 3,600 s, also for /v1/models. Default timeouts here."""
    assert METADATA_TIMEOUT <= 30  # what "within a minute" rests on (plus start-up)
    proc = subprocess.run(
        [sys.executable, "-m", "tokenlens", *trace(silent_socket, tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,  # a hang fails here instead of blocking the suite
    )
    assert_one_line_error(proc.returncode, proc.stderr, silent_socket, "did not answer")
    assert not (tmp_path / "run").exists()  # nothing was created for a server that never spoke


def test_an_html_page_instead_of_json_is_one_line(
    serve: Callable[[Handler], str], tmp_path: Path
) -> None:
    """Probe: a 200 with HTML gave a JSONDecodeError traceback."""
    url = serve(lambda r: reply(r, "<html><body>Sign in</body></html>", "text/html"))
    status, _, err = cli(trace(url, tmp_path))
    assert_one_line_error(status, err, url, "/v1/models", "HTML page")


def test_metrics_that_are_not_prometheus_are_one_line(
    serve: Callable[[Handler], str], tmp_path: Path
) -> None:
    def handler(request: BaseHTTPRequestHandler) -> None:
        if request.path == "/metrics":
            reply(request, "<html>oops</html>", "text/html")
        elif not metadata(request):
            reply(request, "{}")

    url = serve(handler)
    status, _, err = cli(trace(url, tmp_path))
    assert_one_line_error(status, err, url, "/metrics")


def test_a_generation_that_goes_silent_ends_at_the_token_timeout(
    serve: Callable[[Handler], str], tmp_path: Path
) -> None:
    release = threading.Event()

    def handler(request: BaseHTTPRequestHandler) -> None:
        if metadata(request):
            return
        request.send_response(200)
        request.send_header("Content-Type", "text/event-stream")
        request.end_headers()
        request.wfile.write(b'data: {"choices": [{"delta": {"role": "assistant"}}]}\n\n')
        request.wfile.flush()
        release.wait(60)  # then nothing: no token, no end

    url = serve(handler)
    try:
        status, _, err = cli(trace(url, tmp_path, "--token-timeout", "1"))
    finally:
        release.set()
    assert_one_line_error(status, err, url, "sent no token for 1 s", "trace --resume")


def test_a_stream_that_is_not_json_is_one_line(
    serve: Callable[[Handler], str], tmp_path: Path
) -> None:
    def handler(request: BaseHTTPRequestHandler) -> None:
        if not metadata(request):
            reply(request, "data: <html>upstream error</html>\n\n", "text/event-stream")

    url = serve(handler)
    status, _, err = cli(trace(url, tmp_path))
    assert_one_line_error(status, err, url, "/v1/chat/completions", "not JSON")


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "soon"])
def test_timeouts_are_positive_finite_seconds(tmp_path: Path, value: str) -> None:
    for flag in ("--server-timeout", "--token-timeout"):
        status, _, err = cli(trace("http://127.0.0.1:9", tmp_path, flag, value))
        assert_one_line_error(status, err, flag)


def test_a_server_url_without_a_scheme_is_one_line(tmp_path: Path) -> None:
    status, _, err = cli(trace("127.0.0.1:8000", tmp_path))
    assert_one_line_error(status, err, "--server 127.0.0.1:8000", "http://")


def test_timeouts_refuse_what_would_never_end() -> None:
    with pytest.raises(ValueError):
        ServerTimeouts(metadata=float("inf"))


# -- issue 33: a server's answer is checked before it is believed ----------------------------


def _token(i: int) -> dict[str, object]:
    entry = {"token": f"token_id:{100 + i}", "logprob": -0.25}
    return {"token": entry["token"], "logprob": -0.25, "top_logprobs": [entry]}


def _event(i: int, finish: str | None = None) -> bytes:
    choice = {
        "index": 0,
        "delta": {"content": f"t{i}"},
        "logprobs": {"content": [_token(i)]},
        "finish_reason": finish,
    }
    return f"data: {json.dumps({'choices': [choice]})}\n\n".encode()


def streaming(tokens: int, end: bool, then: Handler | None = None) -> Handler:
    """A vLLM-like server whose generation streams ``tokens`` tokens; with ``end``, the
    last carries finish reason ``length`` and ``data: [DONE]`` follows; ``then`` runs
    after the tokens (the connection closes when it returns: HTTP/1.0, no length)."""

    def handler(request: BaseHTTPRequestHandler) -> None:
        if metadata(request):
            return
        request.send_response(200)
        request.send_header("Content-Type", "text/event-stream")
        request.end_headers()
        for i in range(tokens):
            last = end and i == tokens - 1
            request.wfile.write(_event(i, "length" if last else None))
            request.wfile.flush()
        if end:
            request.wfile.write(b"data: [DONE]\n\n")
        if then is not None:
            then(request)

    return handler


def _partial(tmp_path: Path) -> bool:
    return bool(json.loads((tmp_path / "run" / "manifest.json").read_text())["status"] == "partial")


def test_a_whole_stream_completes_the_run(serve: Callable[[Handler], str], tmp_path: Path) -> None:
    """The control of the three below: six tokens, a finish reason and [DONE] are believed."""
    url = serve(streaming(6, end=True))
    status, _, err = cli(trace(url, tmp_path, "--token-timeout", "2"))
    assert status == 0, err
    assert not _partial(tmp_path)


def test_an_html_page_answering_the_generation_is_one_line(
    serve: Callable[[Handler], str], tmp_path: Path
) -> None:
    """Probe (a): the metadata is right, the generation gets a proxy's page with status
    200: it was exit 0 and a `complete` run with empty outputs."""

    def handler(request: BaseHTTPRequestHandler) -> None:
        if not metadata(request):
            reply(request, "<html><body>502 Bad Gateway</body></html>", "text/html")

    url = serve(handler)
    status, _, err = cli(trace(url, tmp_path, "--token-timeout", "2"))
    assert_one_line_error(status, err, url, "/v1/chat/completions", "HTML page", "partial")
    assert _partial(tmp_path)


def test_json_of_another_shape_is_one_line(serve: Callable[[Handler], str], tmp_path: Path) -> None:
    """Probe: an event stream of JSON objects without choices was read as no tokens."""

    def handler(request: BaseHTTPRequestHandler) -> None:
        if not metadata(request):
            body = 'data: {"result": "ok"}\n\ndata: [DONE]\n\n'
            reply(request, body, "text/event-stream")

    url = serve(handler)
    status, _, err = cli(trace(url, tmp_path, "--token-timeout", "2"))
    assert_one_line_error(status, err, url, "another shape", "partial")
    assert _partial(tmp_path)


def test_a_connection_closed_half_way_is_one_line(
    serve: Callable[[Handler], str], tmp_path: Path
) -> None:
    """Probe (b): three of six tokens, then the server closes the connection: it was
    exit 0 and a `complete` run with cut-off outputs (finish reason null)."""
    url = serve(streaming(3, end=False))
    status, _, err = cli(trace(url, tmp_path, "--token-timeout", "2"))
    assert_one_line_error(status, err, url, "ended before its end", "partial")
    assert _partial(tmp_path)


def test_a_done_without_a_finish_reason_is_one_line(
    serve: Callable[[Handler], str], tmp_path: Path
) -> None:
    def handler(request: BaseHTTPRequestHandler) -> None:
        streaming(3, end=False)(request)
        request.wfile.write(b"data: [DONE]\n\n")

    url = serve(handler)
    status, _, err = cli(trace(url, tmp_path, "--token-timeout", "2"))
    assert_one_line_error(status, err, url, "without a finish reason", "after 3 tokens")
    assert _partial(tmp_path)


def test_keep_alive_comments_do_not_extend_the_token_timeout(
    serve: Callable[[Handler], str], tmp_path: Path
) -> None:
    """Probe (c): two tokens, then `: keepalive` every 0.2 s: every byte reset the read
    timeout, so the trace never ended. The server gives up after 60 s on its own."""
    release = threading.Event()

    def keepalive(request: BaseHTTPRequestHandler) -> None:
        for _ in range(300):  # at most 60 s, then the connection closes
            if release.wait(0.2):
                return
            try:
                request.wfile.write(b": keepalive\n\n")
                request.wfile.flush()
            except OSError:
                return  # the client hung up

    url = serve(streaming(2, end=False, then=keepalive))
    t0 = time.monotonic()
    try:
        status, _, err = cli(trace(url, tmp_path, "--token-timeout", "1"))
    finally:
        release.set()
    elapsed = time.monotonic() - t0
    assert_one_line_error(status, err, url, "sent no token for 1 s", "partial")
    assert _partial(tmp_path)
    assert elapsed < 30, elapsed  # a bound on a hang (the server stops at 60 s), not a speed


def test_a_failed_served_run_resumes_when_the_server_answers(
    serve: Callable[[Handler], str], tmp_path: Path
) -> None:
    """A served run cut by the server stays partial and `trace --resume` completes it,
    sending every prompt again, once the server answers whole; the attempt is listed."""
    cut = streaming(3, end=False)
    whole = streaming(6, end=True)
    failing = threading.Event()
    failing.set()

    def handler(request: BaseHTTPRequestHandler) -> None:
        (cut if failing.is_set() else whole)(request)

    url = serve(handler)
    status, _, err = cli(trace(url, tmp_path, "--token-timeout", "2"))
    run = tmp_path / "run"
    assert_one_line_error(status, err, "ended before its end", f"tokenlens trace --resume {run}")
    assert _partial(tmp_path)
    failing.clear()
    status, _, err = cli(["trace", "--resume", str(run), "--quiet"])
    assert status == 0, err
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["server"]
    (attempt,) = manifest["resumed"]
    assert attempt["salvaged_requests"] == 0 and attempt["generated_requests"] == len(PROMPTS)
    requests = pq.read_table(run / "requests.parquet").to_pylist()
    assert sorted(r["prompt_id"] for r in requests) == ["en", "ja"]
    assert all(len(r["output_token_ids"]) == 6 for r in requests)


# -- a served engine's writer thread still holds the last step -------------------------------


def vllm_serving(traces: Path, lag: float) -> Handler:
    """A `vllm serve` with the plugin: a :class:`FakeEngine` (MTP, k = 3) generates each
    request, writes its steps into ``traces`` as the plugin does and counts them on
    /metrics; each request's last step reaches its file ``lag`` seconds after the
    response, as from vLLM's writer thread on a starved machine."""
    engine = FakeEngine(
        FakeVllm(lag=lag),
        EngineConfig(
            "served-model",
            speculative=SpeculativeSpec("mtp", 3, model="tiny-mimo-mtp"),  # every step drafts
            trace_dir=str(traces),
        ),
        traces.parent / "engine.log",
        SILENT,
        0,
    )
    lock = threading.Lock()  # one scheduler: requests generate one at a time

    def counters() -> str:
        total = engine.total
        lines = [
            f"{NUM_DRAFTS}_total {total.num_drafts}",
            f"{NUM_DRAFT_TOKENS}_total {total.num_draft_tokens}",
            f"{NUM_ACCEPTED}_total {total.num_accepted_tokens}",
            *(
                f'{ACCEPTED_PER_POS}_total{{position="{i}"}} {n}'
                for i, n in enumerate(total.accepted_per_position)
            ),
        ]
        return "".join(f"# TYPE {line.split('_total')[0]} counter\n{line}\n" for line in lines)

    def handler(request: BaseHTTPRequestHandler) -> None:
        if request.path == "/metrics":
            with lock:
                reply(request, counters(), "text/plain")
            return
        if metadata(request):
            return
        body = json.loads(request.rfile.read(int(request.headers["Content-Length"])))
        rid = f"chatcmpl-{body['request_id']}"  # as vLLM's OpenAI server names it
        job = PromptJob(rid, body["messages"], None, body["max_tokens"])
        with lock:
            (done,) = engine.generate([job], SamplingConfig(max_tokens=body["max_tokens"])).requests
        request.send_response(200)
        request.send_header("Content-Type", "text/event-stream")
        request.end_headers()
        ids = done.output_token_ids
        for i, token in enumerate(ids):
            entry = {"token": f"token_id:{token}", "logprob": -0.25}
            choice = {
                "index": 0,
                "delta": {"content": f"t{token}"},
                "logprobs": {"content": [{**entry, "top_logprobs": [entry]}]},
                "finish_reason": done.finish_reason if i == len(ids) - 1 else None,
            }
            request.wfile.write(f"data: {json.dumps({'choices': [choice]})}\n\n".encode())
        usage = {"prompt_tokens": done.prompt_token_count, "completion_tokens": len(ids)}
        request.wfile.write(f"data: {json.dumps({'choices': [], 'usage': usage})}\n\n".encode())
        request.wfile.write(b"data: [DONE]\n\n")

    return handler


def test_a_step_still_in_the_servers_writer_is_waited_for(
    serve: Callable[[Handler], str], tmp_path: Path
) -> None:
    """A served engine is never closed (which would flush its writer), so the last step
    of the last request can reach its file after the last response: `trace --server`
    settled once (0.2 s quiet) and then failed, events a draft per request short of the server's
    counters; it now waits once more when they fall short, as the bench does."""
    url = serve(vllm_serving(tmp_path / "traces", lag=0.5))
    argv = trace(url, tmp_path, "--max-tokens", "12")
    argv[argv.index("ngram")] = "mtp"  # the server's method, so the last step drafts too
    status, _, err = cli(argv)
    assert status == 0, err
    run = read_run(tmp_path / "run")
    assert run.manifest["status"] == "complete"
    assert run.manifest["reconciliation"] == {"exact": True, "differences": []}
    assert run.metrics.num_drafts > 0
    check_events(run)
