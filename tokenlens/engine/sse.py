"""What a vLLM server's answer must be before it is believed (``trace --server``, ``bench
--server``): the content type of the reply, the shape of each stream event, and the
stream's proper end (``data: [DONE]`` after a finish reason ``stop`` or ``length``).
``--token-timeout`` is a deadline per token here: keep-alive comments (``: keepalive``)
and events without a token do not extend it. :class:`Malformed` carries what was
wrong; :class:`tokenlens.engine.server.ServerClient` names the URL, path and request.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Iterable, Iterator
from typing import Any

from tokenlens.errors import TokenlensError


class Malformed(Exception):
    """A reply that is not what vLLM sends; the caller names the URL and path."""


def short(exc: BaseException) -> str:
    """An exception as one line of at most 160 characters, for a message."""
    return (" ".join(str(exc).split()) or type(exc).__name__)[:160]


class Cancelled(Exception):
    """The run was interrupted: this request stops reading."""


FINISHED = ("stop", "length")
"""The finish reasons of a request vLLM generated to its end (``abort``, ``error``: it did not)."""


class NoToken(Exception):
    """No token within the token timeout (keep-alive comments do not count)."""


def sse_chunks(
    lines: Iterable[str], cancelled: threading.Event, token_timeout: float = math.inf
) -> Iterator[dict[str, Any]]:
    """The JSON payloads of an OpenAI-style event stream (``data: {...}`` lines).

    Stops (closing the stream, which makes vLLM abort the request) once ``cancelled``
    is set: Ctrl-C ends every request in flight within a token. The stream must end
    with ``data: [DONE]``; one that stops before it (a connection closed half-way) is
    :class:`Malformed`. ``token_timeout`` is a deadline per *token*: comments
    (``: keepalive``) and events without a token do not reset it (:class:`NoToken`).
    """
    deadline = time.monotonic() + token_timeout
    for line in lines:
        if cancelled.is_set():
            raise Cancelled
        if time.monotonic() > deadline:
            raise NoToken
        if not line.startswith("data:"):
            continue
        payload = line[5:].strip()
        if payload == "[DONE]":
            return
        try:
            chunk = json.loads(payload)
        except ValueError as exc:
            raise Malformed(f"an event that is not JSON ({short(exc)})") from None
        if not isinstance(chunk, dict):
            raise Malformed("an event that is not a JSON object")
        if "error" in chunk:
            raise TokenlensError(f"the server reported an error: {chunk['error']}")
        choices = chunk.get("choices")
        if not isinstance(choices, list) or not all(
            isinstance(c, dict) and isinstance(c.get("delta") or {}, dict) for c in choices
        ):
            raise Malformed("an event of another shape (no list of choices with a delta)")
        if any(carries_token(c) or c.get("finish_reason") for c in choices):
            deadline = time.monotonic() + token_timeout
        yield chunk
    raise Malformed("a stream that ended before its end (no data: [DONE]; the connection closed)")


def carries_token(choice: dict[str, Any]) -> bool:
    delta = choice.get("delta") or {}
    logprobs = choice.get("logprobs") or {}
    return bool(delta.get("content") or (isinstance(logprobs, dict) and logprobs.get("content")))


def check_finish(finish: Any, tokens: int) -> str:
    """The finish reason of a whole answer, or :class:`Malformed` naming what is wrong."""
    if finish is None:
        raise Malformed(f"an answer without a finish reason (cut off after {tokens} tokens)")
    if finish not in FINISHED:
        raise Malformed(f"an answer that ended with finish reason {finish!r} ({tokens} tokens)")
    return str(finish)


def check_type(response: Any, expected: str) -> None:
    """The reply's content type is ``expected`` (an HTML page with status 200 is not)."""
    kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != expected:
        what = "an HTML page" if "html" in kind else "a body"
        raise Malformed(f"{what} ({kind or 'no content type'}), not {expected}")
