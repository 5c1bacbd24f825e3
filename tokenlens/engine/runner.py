"""Drive the engine worker from the caller's process (which never imports vLLM)."""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
import time
from multiprocessing.connection import Connection, Listener
from pathlib import Path
from types import TracebackType
from typing import Any

from tokenlens.engine.config import EngineConfig, PromptJob, SamplingConfig
from tokenlens.engine.results import GenerationResult, SpecCounters
from tokenlens.errors import TokenlensError
from tokenlens.progress import SILENT, Progress
from tokenlens.prompts import Prompt


def effective_max_tokens(own: int | None, default: int | None, cap: int | None) -> int | None:
    """The output length a prompt is sent with: its own, else ``default``, never above ``cap``.

    ``cap`` only ever lowers the length (to shorten a study); with no ``default`` a
    prompt without its own length gets ``cap`` itself. Trace's signature is computed
    with this same function, so it describes what was sent.
    """
    limit = own or default
    if cap is None:
        return limit
    return cap if limit is None else min(limit, cap)


WORKER = "tokenlens.engine.worker"


def jobs_from_prompts(
    prompts: list[Prompt], chat: bool = True, cap: int | None = None, default: int | None = None
) -> list[PromptJob]:
    """Chat prompts go through the model's chat template; ``chat=False`` sends raw text.

    ``max_tokens`` per job: :func:`effective_max_tokens` of the prompt's own, ``default``
    (the run's ``--max-tokens``) and ``cap``.
    """
    return [
        PromptJob(
            prompt_id=p.id,
            messages=p.as_messages() if chat or p.messages is not None else None,
            text=None if chat or p.messages is not None else p.text,
            max_tokens=effective_max_tokens(p.max_tokens, default, cap),
        )
        for p in prompts
    ]


def load_hf_tokenizer(name: str) -> Any:
    """The Hugging Face tokenizer vLLM would load for ``name`` (a model directory or hub id).

    transformers' warnings about the tokenizer files are vLLM's business (they are in
    ``engine.log``) and stay off the user's terminal here, as does its advice, at first
    import, that PyTorch is missing (only the tokenizer is needed here).
    """
    if "transformers" not in sys.modules:
        os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    from transformers import AutoTokenizer
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity(logging.ERROR)
    try:
        return AutoTokenizer.from_pretrained(name)
    except Exception as exc:
        detail = " ".join(str(exc).split())[:300]
        raise TokenlensError(
            f"cannot load the tokenizer of {name} to check prompt lengths: {detail}"
        ) from None
    finally:
        hf_logging.set_verbosity(verbosity)


def check_prompt_lengths(
    config: EngineConfig,
    jobs: list[PromptJob],
    default_max_tokens: int,
    tokenizer: Any = None,
    allow_capped: bool = False,
) -> dict[str, int]:
    """Refuse, naming the prompt, any job that cannot fit ``max_model_len`` with its output.

    Each prompt is rendered exactly as the worker renders it
    (:func:`tokenlens.engine.worker.render_prompt`) with the target's tokenizer and
    must leave room for its ``max_tokens``: ``prompt tokens + max_tokens <=
    max_model_len``. vLLM would find a prompt too long for even one output token only
    after the engine start (a minute here, six for a 2 MB prompt) and fail the whole
    run. A prompt that fits but leaves less than its ``max_tokens`` is legal for vLLM,
    which stops its output at ``max_model_len``; it is refused too, because a study
    whose outputs are cut by the context rather than by ``max_tokens`` is rarely what
    was meant, unless ``allow_capped`` (``trace --allow-capped-output``) says it is
    (replay's tests probe exactly that edge). Returns the prompt length of every job.
    """
    from tokenlens.engine.worker import render_prompt

    if tokenizer is None:
        tokenizer = load_hf_tokenizer(config.tokenizer or config.model)
    limit = config.max_model_len
    lengths: dict[str, int] = {}
    for job in jobs:
        max_tokens = job.max_tokens or default_max_tokens
        try:
            n = len(render_prompt(tokenizer, job, config.chat_template_kwargs))
        except Exception as exc:
            detail = " ".join(str(exc).split())[:300] or type(exc).__name__
            raise TokenlensError(
                f"prompt {job.prompt_id!r}: the model's chat template failed: {detail}"
            ) from None
        if n + 1 > limit:  # vLLM's own rule (InputProcessor._validate_model_input)
            raise TokenlensError(
                f"prompt {job.prompt_id!r} is {n} tokens long (chat template included); "
                f"with at least one output token it needs {n + 1} > max_model_len "
                f"{limit}: shorten it or raise --max-model-len"
            )
        if n + max_tokens > limit and not allow_capped:
            raise TokenlensError(
                f"prompt {job.prompt_id!r} is {n} tokens long (chat template included); "
                f"with max_tokens {max_tokens} it needs {n + max_tokens} > max_model_len "
                f"{limit}: shorten it, lower its max_tokens, raise --max-model-len, or "
                "give --allow-capped-output to let vLLM stop its output at max_model_len"
            )
        lengths[job.prompt_id] = n
    return lengths


def capped_by_model_len(
    lengths: dict[str, int], jobs: list[PromptJob], default_max_tokens: int, limit: int
) -> list[str]:
    """The prompts whose output ``max_model_len`` will stop before their ``max_tokens``."""
    return [
        job.prompt_id
        for job in jobs
        if job.prompt_id in lengths
        and lengths[job.prompt_id] + (job.max_tokens or default_max_tokens) > limit
    ]


def capped_note(capped: list[str], limit: int) -> str | None:
    """One warning line for :func:`capped_by_model_len`'s prompts (None: there are none)."""
    if not capped:
        return None
    shown = ", ".join(repr(c) for c in capped[:3]) + (" ..." if len(capped) > 3 else "")
    return (
        f"warning: {len(capped)} prompt(s) ({shown}) cannot reach their max_tokens within "
        f"max_model_len {limit}; vLLM stops their output there (raise --max-model-len to "
        "avoid it)"
    )


def _last_error(log: Path) -> str:
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    for line in reversed(lines):
        if "Error" in line or "error" in line:
            return " ".join(line.split())[-300:]
    return ""


class Engine:
    """A vLLM engine in a worker subprocess; use as a context manager.

    The in-process :class:`tokenlens.engine.backend.Backend`.

    ``log_path`` receives everything vLLM prints (it is verbose); errors raised here
    quote its last error line and name the file.
    """

    def __init__(
        self,
        config: EngineConfig,
        log_path: str | Path | None = None,
        progress: Progress = SILENT,
        env: dict[str, str] | None = None,
        start_timeout: float = 1800.0,
    ) -> None:
        self.config = config
        self.progress = progress
        self.env = env or {}
        self.start_timeout = start_timeout
        if log_path is None:
            fd, name = tempfile.mkstemp(prefix="tokenlens-engine-", suffix=".log")
            os.close(fd)
            log_path = name
        self.log_path = Path(log_path)
        self.info: dict[str, Any] = {}
        self._children: list[Any] = []  # vLLM's engine processes (psutil.Process)
        self._proc: subprocess.Popen[bytes] | None = None
        self._conn: Connection | None = None

    # -- lifecycle -----------------------------------------------------------------
    def __enter__(self) -> Engine:
        try:
            self.start()
        except BaseException:  # Ctrl-C or a failed start: leave no engine behind
            self.abort()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is not None and issubclass(exc_type, KeyboardInterrupt):
            self.abort()  # Ctrl-C: the worker is busy generating and would not hear "close"
        else:
            self.close()

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def start(self) -> None:
        """Start the worker and wait until vLLM has built the engine."""
        authkey = secrets.token_bytes(32)
        listener = Listener(family="AF_UNIX", authkey=authkey)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = self.log_path.open("ab")
        env = {**os.environ, **self.env}
        self._proc = subprocess.Popen(
            [sys.executable, "-m", WORKER, str(listener.address), str(os.getpid())],
            stdin=subprocess.PIPE,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,  # one process group: close() can end vLLM's children too
        )
        log.close()
        assert self._proc.stdin is not None
        self._proc.stdin.write(authkey.hex().encode() + b"\n")
        self._proc.stdin.close()
        accepted: list[Connection] = []
        thread = threading.Thread(target=lambda: accepted.append(listener.accept()), daemon=True)
        thread.start()
        while thread.is_alive():
            thread.join(0.5)
            if self._proc.poll() is not None and thread.is_alive():
                listener.close()
                self._fail_dead("the engine worker exited before connecting")
        listener.close()
        self._conn = accepted[0]
        self._conn.send(("start", self.config))
        self.info = self._wait(self.start_timeout, "start the vLLM engine")
        self._children = _descendants(self._proc.pid)

    def close(self) -> None:
        """Ask the worker to shut vLLM down; kill the process group if it hangs."""
        proc, conn = self._proc, self._conn
        self._proc = self._conn = None
        if proc is None:
            return
        try:
            if conn is not None and proc.poll() is None:
                conn.send(("close",))
                self._wait_on(conn, proc, 120.0, "close the engine", watch_children=False)
        except (TokenlensError, OSError, EOFError):
            pass
        finally:
            if conn is not None:
                conn.close()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=60)
            _kill_group(proc)

    def abort(self, grace: float = 5.0) -> None:
        """End the engine now: SIGTERM its process group (vLLM's engine processes exit
        through their handlers, draining the step recorder), then SIGKILL whatever is
        left after ``grace`` seconds. What was recorded stays for salvage."""
        import psutil

        proc, children = self._proc, self._children
        self._proc = self._conn = None
        if proc is None:
            return
        _kill_group(proc)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=grace)
        with contextlib.suppress(psutil.Error):
            psutil.wait_procs(children, timeout=grace)
        _kill_group(proc, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=grace)

    def kill(self) -> None:
        """SIGKILL the worker and every vLLM process it started (for crash tests)."""
        if self._proc is not None:
            _kill_group(self._proc, signal.SIGKILL)
            self._proc.wait()
            self._proc = None
            self._conn = None

    # -- requests ------------------------------------------------------------------
    def generate(
        self, jobs: list[PromptJob], sampling: SamplingConfig, concurrency: int = 1
    ) -> GenerationResult:
        """Generate ``jobs`` with ``concurrency`` requests in flight at a time."""
        self._send(("generate", jobs, sampling, concurrency))
        result: GenerationResult = self._wait(None, "generate")
        return result

    def call(self, operation: str, *args: Any) -> Any:
        """Run one of the engine's operations (:data:`tokenlens.engine.passes.OPERATIONS`)
        in the worker, next to vLLM: ``operation(llm, *args, progress=...)``."""
        self._send(("call", operation, args))
        return self._wait(None, f"run {operation}")

    def version(self) -> str:
        """The version of the vLLM this engine runs (known once it started)."""
        return str(self.info.get("vllm_version", "unknown"))

    def counters(self) -> SpecCounters:
        """vLLM's cumulative spec-decode counters for this engine."""
        self._send(("counters",))
        result: SpecCounters = self._wait(600.0, "read vLLM's counters")
        return result

    # -- plumbing ------------------------------------------------------------------
    def _send(self, message: tuple[Any, ...]) -> None:
        if self._conn is None:
            raise TokenlensError("the engine is not running")
        self._conn.send(message)

    def _wait(self, timeout: float | None, what: str) -> Any:
        assert self._conn is not None and self._proc is not None
        return self._wait_on(self._conn, self._proc, timeout, what)

    def _wait_on(
        self,
        conn: Connection,
        proc: subprocess.Popen[bytes],
        timeout: float | None,
        what: str,
        watch_children: bool = True,
    ) -> Any:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            if conn.poll(0.5):
                try:
                    kind, *payload = conn.recv()
                except EOFError:
                    self._fail_dead(f"the engine worker died while trying to {what}")
                if kind == "progress":
                    self.progress.advance(payload[0])
                    continue
                if kind == "error":
                    raise TokenlensError(
                        f"vLLM failed to {what}: {payload[0]} (log: {self.log_path})"
                    )
                return payload[0]
            if proc.poll() is not None:
                self._fail_dead(f"the engine worker died while trying to {what}")
            dead = [c for c in self._children if watch_children and not _alive(c)]
            if dead:
                # vLLM's front end can block forever on a dead engine core: end it all.
                _kill_group(proc, signal.SIGKILL)
                proc.wait()
                self._fail_dead(
                    f"a vLLM engine process (pid {dead[0].pid}) died while trying to {what}"
                )
            if deadline is not None and time.monotonic() > deadline:
                raise TokenlensError(
                    f"timed out after {timeout:.0f}s trying to {what} (log: {self.log_path})"
                )

    def _fail_dead(self, message: str) -> None:
        code = self._proc.returncode if self._proc is not None else None
        last = _last_error(self.log_path)
        detail = f": {last}" if last else ""
        raise TokenlensError(f"{message} (exit {code}){detail} (log: {self.log_path})")


def _descendants(pid: int) -> list[Any]:
    import psutil

    try:
        return list(psutil.Process(pid).children(recursive=True))
    except psutil.Error:
        return []


def _alive(process: Any) -> bool:
    import psutil

    try:
        return bool(process.is_running() and process.status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False


def _kill_group(proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)
