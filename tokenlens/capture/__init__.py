"""Capture: a vLLM plugin that records the fate of every draft token.

:mod:`tokenlens.capture.plugin` patches vLLM's scheduler when ``TOKENLENS_TRACE_DIR``
(:data:`tokenlens.engine.config.TRACE_DIR_ENV`) is set (and only then);
:mod:`tokenlens.capture.recorder` appends one JSON line per scheduler step to a
per-process file; :mod:`tokenlens.capture.events` turns those
files into the run directory's ``events.parquet`` without importing vLLM;
:mod:`tokenlens.capture.live` reads files a running engine is still writing.
"""
