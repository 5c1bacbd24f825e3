"""Talk to a running ``vllm serve``: OpenAI-compatible requests and ``/metrics``.

:class:`ServerClient` is the served :class:`tokenlens.engine.backend.Backend`, used by
``tokenlens trace --server`` and ``bench --server``. Token ids come
back through vLLM's ``return_tokens_as_token_ids`` extension of the logprobs format
(``"token_id:123"``); the spec-decode counters are read from the Prometheus endpoint
with ``prometheus_client``'s parser and differenced around the run.
"""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Iterable, Iterator
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
from tokenlens.errors import TokenlensError
from tokenlens.progress import SILENT, Progress


def parse_counters(text: str) -> SpecCounters:
    """vLLM's spec-decode counters from a Prometheus exposition, summed over labels."""
    from prometheus_client.parser import text_string_to_metric_families

    total = SpecCounters()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if not sample.name.endswith("_total"):
                continue
            name = sample.name[: -len("_total")]
            position = int(sample.labels["position"]) if name == ACCEPTED_PER_POS else None
            total += SpecCounters.from_metric(name, sample.value, position)
    return total


def _token_id(token: str) -> int:
    if not token.startswith("token_id:"):
        raise TokenlensError(
            "the server did not return token ids (needs vLLM's return_tokens_as_token_ids)"
        )
    return int(token.split(":", 1)[1])


def _sse_chunks(lines: Iterable[str]) -> Iterator[dict[str, Any]]:
    """The JSON payloads of an OpenAI-style event stream (``data: {...}`` lines)."""
    import json

    for line in lines:
        if not line.startswith("data:"):
            continue
        payload = line[5:].strip()
        if payload == "[DONE]":
            return
        chunk = json.loads(payload)
        if "error" in chunk:
            raise TokenlensError(f"the server reported an error: {chunk['error']}")
        yield chunk


@dataclass
class ServerClient:
    """A thin client of one vLLM OpenAI-compatible server."""

    url: str
    timeout: float = 3600.0
    chat_template_kwargs: dict[str, Any] = field(default_factory=dict)
    # As a Backend: stream responses (first-token latency), report progress per request.
    stream: bool = False
    progress: Progress = SILENT

    def __post_init__(self) -> None:
        import httpx

        self.url = self.url.rstrip("/")
        self._http = httpx.Client(base_url=self.url, timeout=self.timeout)
        self.info: dict[str, Any] = {}
        self._version: str | None = None
        self._model: str | None = None

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
        except httpx.HTTPError as exc:
            raise TokenlensError(
                f"cannot reach the vLLM server at {self.url}{path}: {exc}"
            ) from None
        return response

    def version(self) -> str:
        if self._version is None:
            self._version = str(self._get("/version").json().get("version", "unknown"))
        return self._version

    def model(self) -> str:
        """The id of the model the server serves (the first it lists)."""
        if self._model is None:
            data = self._get("/v1/models").json()["data"]
            if not data:
                raise TokenlensError(f"the server at {self.url} serves no model")
            self._model = str(data[0]["id"])
        return self._model

    def counters(self) -> SpecCounters:
        return parse_counters(self._get("/metrics").text)

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
        t0 = time.perf_counter()
        first: float | None = None
        prompt_ids: list[int] | None = None
        try:
            if stream:
                body["stream"] = True
                body["stream_options"] = {"include_usage": True}
                content: list[dict[str, Any]] = []
                text: list[str] = []
                finish: str | None = None
                usage: dict[str, Any] = {}
                metrics: dict[str, Any] = {}
                with self._http.stream("POST", "/v1/chat/completions", json=body) as response:
                    response.raise_for_status()
                    for chunk in _sse_chunks(response.iter_lines()):
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
            else:
                response = self._http.post("/v1/chat/completions", json=body)
                response.raise_for_status()
                data = response.json()
                choice = data["choices"][0]
                content = (choice.get("logprobs") or {}).get("content") or []
                output_text = choice["message"].get("content") or ""
                finish = choice.get("finish_reason")
                usage = data.get("usage") or {}
                metrics = data.get("metrics") or {}
                prompt_ids = data.get("prompt_token_ids")
        except httpx.HTTPError as exc:
            raise TokenlensError(f"request {job.rid} to {self.url} failed: {exc}") from None
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
        """All jobs, ``concurrency`` in flight; results in job order and the wall time."""
        t0 = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
            futures = [pool.submit(self.chat, model, job, sampling, stream) for job in jobs]
            for _ in concurrent.futures.as_completed(futures):
                progress.advance()
            results = [f.result() for f in futures]
        return results, time.perf_counter() - t0
