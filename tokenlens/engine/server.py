"""Talk to a running ``vllm serve``: OpenAI-compatible requests and ``/metrics``.

:class:`ServerClient` is the served :class:`tokenlens.engine.backend.Backend`, used by
``tokenlens trace --server`` and ``bench --server``. Token ids come
back through vLLM's ``return_tokens_as_token_ids`` extension of the logprobs format
(``"token_id:123"``); the spec-decode counters are read from the Prometheus endpoint
with ``prometheus_client``'s parser and differenced around the run.

Timeouts fit the call (:class:`ServerTimeouts`): a metadata request (``/v1/models``,
``/version``, ``/metrics``) must be answered within seconds, and a streamed generation
may go quiet for at most one token's allowance at a time, so a silent server ends a
trace with one line naming its URL, while a long generation that keeps producing
tokens is never cut; the allowance is per token, so keep-alive comments do not extend
it. A reply is believed only when it is what vLLM sends: the content type of a stream
or of JSON, the shape of its events, and its proper end (``data: [DONE]`` and a finish
reason of ``stop`` or ``length``); anything else (HTML from a proxy, JSON of another
shape, a connection closed half-way) is one line too, naming the URL and path.
"""

from __future__ import annotations

import math
import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from tokenlens.engine.config import PromptJob, SamplingConfig
from tokenlens.engine.results import (
    ACCEPTED_PER_POS,
    GeneratedRequest,
    GenerationResult,
    SpecCounters,
    TokenLogprobs,
)
from tokenlens.engine.sse import (
    Malformed,
    NoToken,
    check_finish,
    check_type,
    short,
    sse_chunks,
)
from tokenlens.errors import TokenlensError
from tokenlens.progress import SILENT, Progress

METADATA_TIMEOUT = 10.0
"""Seconds a server has to answer ``/v1/models``, ``/version`` or ``/metrics``."""
TOKEN_TIMEOUT = 120.0
"""Seconds a streamed generation may go without a token (the first includes queueing and
prefill, which on a CPU server with many requests in flight takes tens of seconds)."""


@dataclass(frozen=True)
class ServerTimeouts:
    """How long the server may stay silent: per metadata request, and per token generated."""

    metadata: float = METADATA_TIMEOUT
    token: float = TOKEN_TIMEOUT

    def __post_init__(self) -> None:
        for name in ("metadata", "token"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"{name} timeout must be a positive number of seconds")


def parse_counters(text: str) -> SpecCounters:
    """vLLM's spec-decode counters from a Prometheus exposition, summed over labels."""
    from prometheus_client.parser import text_string_to_metric_families

    total = SpecCounters()
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if not sample.name.endswith("_total"):
                    continue
                name = sample.name[: -len("_total")]
                position = int(sample.labels["position"]) if name == ACCEPTED_PER_POS else None
                total += SpecCounters.from_metric(name, sample.value, position)
    except (ValueError, KeyError, TypeError, IndexError) as exc:
        raise Malformed(f"not a Prometheus exposition ({short(exc)})") from None
    return total


def _token_id(token: str) -> int:
    if not token.startswith("token_id:"):
        raise TokenlensError(
            "the server did not return token ids (needs vLLM's return_tokens_as_token_ids)"
        )
    return int(token.split(":", 1)[1])


@dataclass
class ServerClient:
    """A thin client of one vLLM OpenAI-compatible server."""

    url: str
    timeouts: ServerTimeouts = field(default_factory=ServerTimeouts)
    chat_template_kwargs: dict[str, Any] = field(default_factory=dict)
    # As a Backend: stream responses (first-token latency; a timeout per token rather
    # than per request), report progress per request.
    stream: bool = False
    progress: Progress = SILENT

    def __post_init__(self) -> None:
        import httpx

        self.url = self.url.rstrip("/")
        if not self.url.startswith(("http://", "https://")):
            raise TokenlensError(
                f"--server {self.url}: give the server's URL, like http://127.0.0.1:8000"
            )
        self._http = httpx.Client(base_url=self.url, timeout=self.timeouts.metadata)
        self.info: dict[str, Any] = {}
        self._version: str | None = None
        self._model: str | None = None
        self._cancelled = threading.Event()

    def _generation_timeout(self, max_tokens: int) -> Any:
        """Streamed: each read may wait one token's allowance. Whole: every token's."""
        import httpx

        read = self.timeouts.token if self.stream else self.timeouts.token * (max_tokens + 1)
        return httpx.Timeout(self.timeouts.metadata, read=read)

    def __enter__(self) -> ServerClient:
        return self

    def __exit__(self, *exc: object) -> None:
        """Nothing to stop: the server outlives the client."""

    def generate(
        self, jobs: list[PromptJob], sampling: SamplingConfig, concurrency: int = 1
    ) -> GenerationResult:
        """The jobs on the served model; counters differenced around the batch.

        The difference is exact only if no other client uses the server meanwhile.
        """
        before = self.counters()
        requests, wall = self.run(
            self.model(), jobs, sampling, concurrency, self.progress, self.stream
        )
        return GenerationResult(tuple(requests), wall, self.counters() - before, self.version())

    def _get(self, path: str) -> Any:
        import httpx

        try:
            response = self._http.get(path)
            response.raise_for_status()
        except httpx.TimeoutException:
            raise TokenlensError(
                f"the vLLM server at {self.url} did not answer {path} within "
                f"{self.timeouts.metadata:g} s (is it starting, or hung? --server-timeout "
                "sets the wait)"
            ) from None
        except httpx.HTTPError as exc:
            raise TokenlensError(
                f"cannot reach the vLLM server at {self.url}{path}: {short(exc)}"
            ) from None
        return response

    def _json(self, path: str) -> Any:
        response = self._get(path)
        try:
            return response.json()
        except ValueError:
            raise self._malformed(path, f"not JSON but {_describe(response)}") from None

    def _malformed(self, path: str, what: str) -> TokenlensError:
        return TokenlensError(
            f"the reply of the server at {self.url} to {path} is {what}: is it a vLLM server?"
        )

    def version(self) -> str:
        if self._version is None:
            data = self._json("/version")
            if not isinstance(data, dict):
                raise self._malformed("/version", "JSON without a version")
            self._version = str(data.get("version", "unknown"))
        return self._version

    def model(self) -> str:
        """The id of the model the server serves (the first it lists)."""
        if self._model is None:
            data = self._json("/v1/models")
            try:
                listed = data["data"]
                if not listed:
                    raise TokenlensError(f"the server at {self.url} serves no model")
                self._model = str(listed[0]["id"])
            except (KeyError, TypeError, IndexError):
                raise self._malformed("/v1/models", "JSON that lists no model ids") from None
        return self._model

    def counters(self) -> SpecCounters:
        response = self._get("/metrics")
        try:
            return parse_counters(response.text)
        except Malformed as exc:
            raise self._malformed("/metrics", str(exc)) from None

    def _body(self, model: str, job: PromptJob, sampling: SamplingConfig) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": model,
            "max_tokens": job.max_tokens or sampling.max_tokens,
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
            "seed": sampling.seed,
            "request_id": job.rid,
            "return_tokens_as_token_ids": True,
            "return_token_ids": True,  # the prompt's token ids, for replay
            "logprobs": True,
            "top_logprobs": sampling.logprobs or 1,
            "messages": job.messages or [{"role": "user", "content": job.text or ""}],
        }
        if sampling.top_k:
            body["top_k"] = sampling.top_k
        if sampling.ignore_eos:
            body["ignore_eos"] = True
        if self.chat_template_kwargs:
            body["chat_template_kwargs"] = dict(self.chat_template_kwargs)
        return body

    def chat(
        self, model: str, job: PromptJob, sampling: SamplingConfig, stream: bool = False
    ) -> GeneratedRequest:
        """One request with token ids and top-k logprobs.

        With ``stream``, the response is read as server-sent events and the time to the
        first content chunk is the request's first-token latency (what a user sees).
        """
        import httpx

        body = self._body(model, job, sampling)
        timeout = self._generation_timeout(int(body["max_tokens"]))
        t0 = time.perf_counter()
        first: float | None = None
        prompt_ids: list[int] | None = None
        path = "/v1/chat/completions"
        try:
            if stream:
                body["stream"] = True
                body["stream_options"] = {"include_usage": True}
                content: list[dict[str, Any]] = []
                text: list[str] = []
                finish: str | None = None
                usage: dict[str, Any] = {}
                metrics: dict[str, Any] = {}
                with self._http.stream("POST", path, json=body, timeout=timeout) as response:
                    response.raise_for_status()
                    check_type(response, "text/event-stream")
                    lines = response.iter_lines()
                    for chunk in sse_chunks(lines, self._cancelled, self.timeouts.token):
                        prompt_ids = chunk.get("prompt_token_ids") or prompt_ids
                        usage = chunk.get("usage") or usage
                        metrics = chunk.get("metrics") or metrics
                        for choice in chunk.get("choices") or ():
                            piece = (choice.get("delta") or {}).get("content") or ""
                            entries = (choice.get("logprobs") or {}).get("content") or []
                            if first is None and (piece or entries):
                                first = time.perf_counter() - t0
                            text.append(piece)
                            content.extend(entries)
                            finish = choice.get("finish_reason") or finish
                output_text = "".join(text)
                finish = check_finish(finish, len(content))
            else:
                response = self._http.post(path, json=body, timeout=timeout)
                response.raise_for_status()
                check_type(response, "application/json")
                try:
                    data = response.json()
                except ValueError:
                    raise Malformed(f"not JSON but {_describe(response)}") from None
                choice = data["choices"][0]
                content = (choice.get("logprobs") or {}).get("content") or []
                output_text = choice["message"].get("content") or ""
                finish = check_finish(choice.get("finish_reason"), len(content))
                usage = data.get("usage") or {}
                metrics = data.get("metrics") or {}
                prompt_ids = data.get("prompt_token_ids")
        except (httpx.TimeoutException, NoToken):
            raise TokenlensError(
                f"request {job.rid} to {self.url}: the server sent no token for "
                f"{timeout.read:g} s (--token-timeout sets the wait)"
            ) from None
        except httpx.HTTPError as exc:
            raise TokenlensError(f"request {job.rid} to {self.url} failed: {short(exc)}") from None
        except Malformed as exc:
            raise self._malformed(path, f"{exc} (request {job.rid})") from None
        except (KeyError, TypeError, IndexError, AttributeError) as exc:
            raise self._malformed(path, f"JSON of another shape (no {short(exc)})") from None
        try:
            return self._request(
                job, sampling, content, output_text, finish, usage, metrics, prompt_ids, first
            )
        except (KeyError, TypeError, IndexError, ValueError, AttributeError) as exc:
            raise self._malformed(path, f"logprobs of another shape ({short(exc)})") from None

    def _request(
        self,
        job: PromptJob,
        sampling: SamplingConfig,
        content: list[dict[str, Any]],
        output_text: str,
        finish: str | None,
        usage: dict[str, Any],
        metrics: dict[str, Any],
        prompt_ids: list[int] | None,
        first: float | None,
    ) -> GeneratedRequest:
        """One response's parts as a :class:`GeneratedRequest` (token ids from the logprobs)."""
        ids = tuple(_token_id(entry["token"]) for entry in content)
        logprobs = tuple(
            TokenLogprobs(
                logprob=float(entry["logprob"]),
                rank=next(
                    (
                        i + 1
                        for i, t in enumerate(entry["top_logprobs"])
                        if t["token"] == entry["token"]
                    ),
                    0,
                ),
                top_ids=tuple(_token_id(t["token"]) for t in entry["top_logprobs"]),
                top_logprobs=tuple(float(t["logprob"]) for t in entry["top_logprobs"]),
            )
            for entry in content
        )
        return GeneratedRequest(
            prompt_id=job.prompt_id,
            vllm_request_id=job.rid,
            prompt_token_count=int(usage.get("prompt_tokens", 0)),
            output_token_ids=ids,
            output_text=output_text,
            finish_reason=finish,
            logprobs=logprobs if sampling.logprobs else None,
            first_token_latency=first,
            spec_decode=metrics.get("speculative_decoding"),
            prompt_token_ids=None if prompt_ids is None else tuple(int(t) for t in prompt_ids),
        )

    def run(
        self,
        model: str,
        jobs: list[PromptJob],
        sampling: SamplingConfig,
        concurrency: int,
        progress: Progress = SILENT,
        stream: bool = False,
    ) -> tuple[list[GeneratedRequest], float]:
        """All jobs, ``concurrency`` in flight; results in job order and the wall time.

        The first failure (or Ctrl-C) stops the rest: queued requests are not sent and
        streaming ones stop reading at their next token, so the error is reported at
        once instead of after every other request ran to its end.
        """
        t0 = time.perf_counter()
        self._cancelled.clear()
        pending: queue.SimpleQueue[tuple[int, PromptJob]] = queue.SimpleQueue()
        for item in enumerate(jobs):
            pending.put(item)
        done: queue.SimpleQueue[tuple[int, GeneratedRequest | None, BaseException | None]]
        done = queue.SimpleQueue()

        def work() -> None:
            while not self._cancelled.is_set():
                try:
                    i, job = pending.get_nowait()
                except queue.Empty:
                    return
                try:
                    done.put((i, self.chat(model, job, sampling, stream), None))
                except BaseException as exc:  # handed to the caller's thread
                    done.put((i, None, exc))

        # Daemon threads: after a failure or Ctrl-C nothing waits for the requests still
        # in flight (a streaming one stops at its next token; the others are abandoned).
        for _ in range(max(1, min(concurrency, len(jobs)))):
            threading.Thread(target=work, daemon=True).start()
        results: list[GeneratedRequest | None] = [None] * len(jobs)
        try:
            for _ in jobs:
                while True:
                    try:
                        i, result, error = done.get(timeout=0.5)  # Ctrl-C is seen here
                        break
                    except queue.Empty:
                        continue
                if error is not None:
                    raise error
                results[i] = result
                progress.advance()
        except BaseException:
            self._cancelled.set()
            raise
        return [r for r in results if r is not None], time.perf_counter() - t0


def _describe(response: Any) -> str:
    """``an HTML page (text/html, 1,234 bytes)``: what came back instead of JSON."""
    kind = response.headers.get("content-type", "no content type").split(";")[0]
    what = "an HTML page" if "html" in kind else "a body"
    return f"{what} ({kind}, {len(response.content):,} bytes)"
