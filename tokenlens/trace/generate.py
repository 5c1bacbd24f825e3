"""Generating a batch and, when the engine dies, salvaging what finished: shared by a
new trace (:mod:`tokenlens.trace.run`) and a resumed one (:mod:`tokenlens.trace.resume`).
"""

from __future__ import annotations

import json
from typing import Any

from tokenlens.capture.placeholders import async_note
from tokenlens.engine.backend import Backend
from tokenlens.engine.config import (
    PromptJob,
)
from tokenlens.engine.results import GenerationResult
from tokenlens.errors import Interrupted, TokenlensError, interruption, os_error_line
from tokenlens.progress import Progress
from tokenlens.rundir import (
    MANIFEST,
)
from tokenlens.salvage import Salvage, salvage_partial
from tokenlens.trace.config import TraceConfig
from tokenlens.trace.manifest import engine_fields


def note_lost_identities(summary: dict[str, Any], progress: Progress) -> None:
    lost = summary["placeholder_drafts"]["rejected"]
    if lost:
        why = "async scheduling" if summary.get("async_scheduling") else "vLLM's padded drafts"
        progress.note(
            f"warning: {lost} rejected drafts have no token id ({why}); see docs/capture.md"
        )


def generate_or_salvage(
    backend: Backend,
    config: TraceConfig,
    jobs: list[PromptJob],
    run: tuple[list[PromptJob], dict[str, str], dict[str, str | None]] | None,
    if_dead: str,
    progress: Progress,
    start: str | None = "start the vLLM engine",
) -> GenerationResult:
    """Start the backend and generate ``jobs``; if it fails, salvage the run and say ``if_dead``.

    ``run`` is every job of the run with its languages and pairs (what salvage needs);
    None: nothing to salvage (a server's step files are shared). A dead engine, a
    full disk, Ctrl-C, SIGTERM and SIGHUP end the same way: what finished is salvaged
    into the ``partial`` run and one line says how to continue it (exit 130, 143, 129).
    ``if_dead`` may hold ``{finished}``, replaced by how many requests finished.
    """
    if start is not None:
        progress.stage(start)
    try:
        with backend:
            note = async_note(backend.info.get("engine"))  # vLLM's resolved config says
            if note is not None:
                progress.note(f"warning: {note}")
            progress.stage("generate", total=len(jobs), unit="prompt")
            return backend.generate(jobs, config.sampling, config.concurrency)
    except (TokenlensError, OSError) as exc:
        line = str(exc) if isinstance(exc, TokenlensError) else os_error_line(exc)
        said = if_dead.replace("{finished}", _salvage_note(config, run, _info(backend)))
        raise TokenlensError(f"{line} — {said}") from None
    except KeyboardInterrupt as exc:  # Ctrl-C, SIGTERM, SIGHUP (tokenlens.errors.Stopped)
        what, signal_number = interruption(exc)
        said = if_dead.replace("{finished}", _salvage_note(config, run, _info(backend)))
        raise Interrupted(f"{what} — {said}", signal_number) from None


def _info(backend: Backend) -> dict[str, Any]:
    """What the backend said about itself (empty until it started)."""
    info = getattr(backend, "info", None)
    return info if isinstance(info, dict) else {}


def _salvage_note(
    config: TraceConfig,
    run: tuple[list[PromptJob], dict[str, str], dict[str, str | None]] | None,
    info: dict[str, Any],
) -> str:
    """Salvage what finished; what to say about it (never raises an OSError)."""
    if run is None:
        return ""
    try:
        found = salvage_run(config, *run, facts=engine_fields(info, {}) if info else None)
    except OSError as exc:
        return f" (salvaging failed: {os_error_line(exc)}; --resume salvages it later)"
    return f" ({len(found.finished)} of {len(run[0])} requests finished)"


def salvage_run(
    config: TraceConfig,
    jobs: list[PromptJob],
    langs: dict[str, str],
    pairs: dict[str, str | None],
    facts: dict[str, Any] | None = None,
) -> Salvage:
    manifest = json.loads((config.out / MANIFEST).read_text(encoding="utf-8"))
    return salvage_partial(
        config.out,
        str(manifest["tokenizer"]),
        langs,
        pairs,
        {job.rid: job.max_tokens for job in jobs},
        config.sampling.ignore_eos,
        facts,
    )
