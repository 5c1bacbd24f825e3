"""Talk to a running ``vllm serve``: OpenAI-compatible requests and ``/metrics``.

Used by ``tokenlens trace --server`` (and later by ``bench --server``). Token ids come
back through vLLM's ``return_tokens_as_token_ids`` extension of the logprobs format
(``"token_id:123"``); the spec-decode counters are read from the Prometheus endpoint
with ``prometheus_client``'s parser and differenced around the run.
"""

from __future__ import annotations

import concurrent.futures
import time
from dataclasses import dataclass
from typing import Any

from tokenlens.engine.config import SamplingConfig
from tokenlens.engine.results import (
    ACCEPTED_PER_POS,
    NUM_ACCEPTED,
    NUM_DRAFT_TOKENS,
    NUM_DRAFTS,
    GeneratedRequest,
    SpecCounters,
    TokenLogprobs,
)
from tokenlens.engine.worker import PromptJob
from tokenlens.errors import TokenlensError
from tokenlens.progress import SILENT, Progress


def parse_counters(text: str) -> SpecCounters:
    """vLLM's spec-decode counters from a Prometheus exposition, summed over labels."""
    from prometheus_client.parser import text_string_to_metric_families

    totals = {NUM_DRAFTS: 0.0, NUM_DRAFT_TOKENS: 0.0, NUM_ACCEPTED: 0.0}
    per_pos: dict[int, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if not sample.name.endswith("_total"):
                continue
            name = sample.name[: -len("_total")]
            if name in totals:
                totals[name] += sample.value
            elif name == ACCEPTED_PER_POS:
                pos = int(sample.labels["position"])
                per_pos[pos] = per_pos.get(pos, 0.0) + sample.value
    width = max(per_pos) + 1 if per_pos else 0
    return SpecCounters(
        num_drafts=int(totals[NUM_DRAFTS]),
        num_draft_tokens=int(totals[NUM_DRAFT_TOKENS]),
        num_accepted_tokens=int(totals[NUM_ACCEPTED]),
        accepted_per_position=tuple(int(per_pos.get(i, 0)) for i in range(width)),
    )


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
    timeout: float = 3600.0

    def __post_init__(self) -> None:
        import httpx

        self.url = self.url.rstrip("/")
        self._http = httpx.Client(base_url=self.url, timeout=self.timeout)

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
        return str(self._get("/version").json().get("version", "unknown"))

    def model(self) -> str:
        data = self._get("/v1/models").json()["data"]
        if not data:
            raise TokenlensError(f"the server at {self.url} serves no model")
        return str(data[0]["id"])

    def counters(self) -> SpecCounters:
        return parse_counters(self._get("/metrics").text)

    def chat(self, model: str, job: PromptJob, sampling: SamplingConfig) -> GeneratedRequest:
        """One request, non-streaming, with token ids and top-k logprobs."""
        import httpx

        body: dict[str, Any] = {
            "model": model,
            "max_tokens": job.max_tokens or sampling.max_tokens,
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
            "seed": sampling.seed,
            "request_id": job.rid,
            "return_tokens_as_token_ids": True,
            "logprobs": True,
            "top_logprobs": sampling.logprobs or 1,
        }
        if sampling.top_k:
            body["top_k"] = sampling.top_k
        body["messages"] = job.messages or [{"role": "user", "content": job.text or ""}]
        try:
            response = self._http.post("/v1/chat/completions", json=body)
            response.raise_for_status()
        except httpx.HTTPError as exc:
            raise TokenlensError(f"request {job.rid} to {self.url} failed: {exc}") from None
        choice = response.json()["choices"][0]
        content = (choice.get("logprobs") or {}).get("content") or []
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
            prompt_token_count=int(response.json().get("usage", {}).get("prompt_tokens", 0)),
            output_token_ids=ids,
            output_text=choice["message"].get("content") or "",
            finish_reason=choice.get("finish_reason"),
            logprobs=logprobs if sampling.logprobs else None,
            first_token_latency=None,
        )

    def run(
        self,
        model: str,
        jobs: list[PromptJob],
        sampling: SamplingConfig,
        concurrency: int,
        progress: Progress = SILENT,
    ) -> tuple[list[GeneratedRequest], float]:
        """All jobs, ``concurrency`` in flight; results in job order and the wall time."""
        t0 = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
            futures = [pool.submit(self.chat, model, job, sampling) for job in jobs]
            for _ in concurrent.futures.as_completed(futures):
                progress.advance()
            results = [f.result() for f in futures]
        return results, time.perf_counter() - t0
