"""Bench plans: a TOML file that names models, methods, k, corpora and repeats.

A plan expands into *cases* (model x method x k x corpus x length x language), ordered
so that cases sharing an engine (same model and speculative config) run back to back
and the engine is started once for them. Every key is checked here, with one-line
errors that name the table and key; :mod:`tokenlens.bench.vllm_check` then checks the
speculative and engine settings against the pinned vLLM's own config definitions.
The format is documented in docs/bench.md.
"""

from __future__ import annotations

import hashlib
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tokenlens.bench.plan_table import Table as _Table
from tokenlens.bench.plan_table import unique, where_of
from tokenlens.capture.layout import options_refusal
from tokenlens.engine.config import METHODS_WITH_DRAFT_MODEL
from tokenlens.engine.options import RESERVED
from tokenlens.errors import TokenlensError
from tokenlens.prompts import Prompt, normalise_lang, read_prompts

BASELINE = "none"


@dataclass(frozen=True)
class ModelEntry:
    """A target model and how vLLM loads it."""

    name: str
    path: str
    dtype: str = "auto"
    quantization: str | None = None
    load_format: str = "auto"
    max_model_len: int = 4096
    methods: tuple[str, ...] | None = None  # method names to run (None: all)
    engine: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class MethodEntry:
    """A speculative method (vLLM's name) with its k values and options."""

    name: str
    method: str
    k: tuple[int, ...] = (0,)
    draft_model: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    # vLLM engine arguments for this method's engines (over the model's ``engine``),
    # and environment variables of its engine processes: e.g. a baseline forced onto
    # the V1 model runner without async scheduling, to compare like with like.
    engine: dict[str, Any] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class CorpusEntry:
    """A selection of a corpus: languages, lengths (``tags.length``), prompts per group."""

    name: str
    path: Path
    langs: tuple[str, ...] = ("ja", "en")
    lengths: tuple[str, ...] | None = None
    limit: int | None = None
    # Requests in flight for this corpus's cases (None: the [bench] concurrency).
    concurrency: tuple[int, ...] | None = None


@dataclass(frozen=True)
class Sampling:
    """Sampling of every request: greedy by default, thinking off where a template has it."""

    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0
    seed: int = 0
    max_tokens: int | None = None  # cap on every prompt's own max_tokens
    ignore_eos: bool = False
    thinking: bool = False


@dataclass(frozen=True)
class Case:
    """One cell of the speed matrix."""

    index: int
    model: ModelEntry
    method: MethodEntry
    k: int
    corpus: CorpusEntry
    length: str
    lang: str
    prompts: tuple[Prompt, ...]
    concurrency: int = 1
    # The plan lists several concurrencies: the case id names this one (``/c32``).
    tag_concurrency: bool = False

    @property
    def label(self) -> str:
        return (
            self.method.name if self.method.method == BASELINE else f"{self.method.name}-k{self.k}"
        )

    @property
    def case_id(self) -> str:
        parts = [self.model.name, self.label, self.corpus.name, self.length or "all", self.lang]
        if self.tag_concurrency:
            parts.append(f"c{self.concurrency}")
        return "/".join(parts)

    @property
    def slug(self) -> str:
        """The case's directory name under ``runs/``."""
        return self.case_id.replace("/", ".")

    @property
    def engine_key(self) -> tuple[str, str, int]:
        """Cases with equal keys share one engine."""
        return (self.model.name, self.method.name, self.k)


@dataclass(frozen=True)
class Plan:
    """A validated plan and the cases it expands to."""

    path: Path
    sha256: str
    name: str
    description: str
    warmup: int
    warmup_tokens: int | None  # cap on warm-up requests' max_tokens (None: as measured)
    repeats: int
    concurrency: int  # the first of ``concurrencies``
    chat: bool
    sampling: Sampling
    models: tuple[ModelEntry, ...]
    methods: tuple[MethodEntry, ...]
    corpora: tuple[CorpusEntry, ...]
    cases: tuple[Case, ...]
    raw: dict[str, Any]
    concurrencies: tuple[int, ...] = (1,)


def _model(i: int, data: Any) -> ModelEntry:
    t = _Table(where_of("model", i, data), data, _MODEL_KEYS | {"methods", "engine"})
    name = t.name()
    engine = _engine_table(t)
    return ModelEntry(
        name=name,
        path=t.require("path", str),
        dtype=t.get("dtype", str, "auto"),
        quantization=t.get("quantization", str, None) or None,
        load_format=t.get("load_format", str, "auto"),
        max_model_len=t.positive("max_model_len", 4096, minimum=16),
        methods=t.strings("methods", None),
        engine=engine,
    )


_MODEL_KEYS = {"name", "path", "dtype", "quantization", "load_format", "max_model_len"}


def _engine_table(t: _Table) -> dict[str, Any]:
    """An ``engine`` table: vLLM engine arguments other than those tokenlens sets."""
    engine = t.table("engine")
    for key in sorted(engine):
        if key in _MODEL_KEYS or key in RESERVED:
            raise t.fail(
                f"engine.{key}",
                "tokenlens sets it"
                + (" from the model's own key of that name" if key in _MODEL_KEYS else ""),
            )
    if (why := options_refusal(engine)) is not None:  # a layout that cannot be traced
        raise t.fail("engine", why)
    return engine


def _env_table(t: _Table) -> dict[str, str]:
    """An ``env`` table: environment variables of the engine's processes (strings)."""
    env = t.table("env")
    for key, value in env.items():
        if not key or not isinstance(value, str):
            raise t.fail(f"env.{key}", 'expected a string value (TOML quotes: "0")')
    return env


def _method(i: int, data: Any) -> MethodEntry:
    known = {"name", "method", "k", "draft_model", "options", "engine", "env"}
    t = _Table(where_of("method", i, data), data, known)
    name = t.name()
    method: str = t.require("method", str)
    draft = t.get("draft_model", str, None)
    options = t.table("options")
    engine, env = _engine_table(t), _env_table(t)
    if method == BASELINE:
        if "k" in t.data or draft is not None or options:
            raise t.fail("method", "a baseline ('none') takes no k, draft_model or options")
        return MethodEntry(name, method, engine=engine, env=env)
    raw_k = t.require("k", (int, list))
    ks = [raw_k] if isinstance(raw_k, int) else raw_k
    if not ks or not all(isinstance(k, int) and not isinstance(k, bool) and k >= 1 for k in ks):
        raise t.fail("k", "expected a positive integer or a non-empty list of them")
    if len(set(ks)) != len(ks):
        raise t.fail("k", f"repeats a value: {ks}")
    if method in METHODS_WITH_DRAFT_MODEL and draft is None:
        raise t.fail("draft_model", f"method {method!r} needs a drafter model")
    if method not in METHODS_WITH_DRAFT_MODEL and draft is not None:
        raise t.fail("draft_model", f"method {method!r} takes no separate drafter")
    for key in ("method", "num_speculative_tokens", "model"):
        if key in options:
            raise t.fail(
                f"options.{key}", "set it with the method's own key (method, k, draft_model)"
            )
    return MethodEntry(name, method, tuple(ks), draft, options, engine, env)


def _corpus(i: int, data: Any, base: Path) -> CorpusEntry:
    known = {"name", "path", "langs", "lengths", "limit", "concurrency"}
    t = _Table(where_of("corpus", i, data), data, known)
    name = t.name()
    path = Path(t.require("path", str))
    if not path.is_absolute():
        path = base / path
    if not path.is_file():
        raise t.fail("path", f"no such file: {path}")
    limit = t.get("limit", int, None)
    if limit is not None and limit < 1:
        raise t.fail("limit", f"must be at least 1, got {limit}")
    return CorpusEntry(
        name=name,
        path=path,
        langs=tuple(normalise_lang(x) for x in t.strings("langs", ("ja", "en")) or ("ja", "en")),
        lengths=t.strings("lengths", None),
        limit=limit,
        concurrency=_concurrencies(t) if "concurrency" in t.data else None,
    )


def _sampling(data: Any) -> Sampling:
    known = {"temperature", "top_p", "top_k", "seed", "max_tokens", "ignore_eos", "thinking"}
    t = _Table("[sampling]", data, known)
    temperature = float(t.get("temperature", (int, float), 0.0))
    if temperature < 0:
        raise t.fail("temperature", "must be >= 0")
    top_p = float(t.get("top_p", (int, float), 1.0))
    if not 0 < top_p <= 1:
        raise t.fail("top_p", "must be in (0, 1]")
    max_tokens = t.get("max_tokens", int, None)
    if max_tokens is not None and max_tokens < 1:
        raise t.fail("max_tokens", "must be at least 1")
    return Sampling(
        temperature=temperature,
        top_p=top_p,
        top_k=t.get("top_k", int, 0),
        seed=t.get("seed", int, 0),
        max_tokens=max_tokens,
        ignore_eos=t.get("ignore_eos", bool, False),
        thinking=t.get("thinking", bool, False),
    )


def _length(prompt: Prompt) -> str:
    tags = prompt.tags if isinstance(prompt.tags, dict) else {}
    value = tags.get("length")
    return str(value) if value is not None else ""


def _select(corpus: CorpusEntry, prompts: list[Prompt]) -> dict[tuple[str, str], list[Prompt]]:
    """Prompts per (length, lang), at most ``limit`` each, in corpus order."""
    groups: dict[tuple[str, str], list[Prompt]] = {}
    lengths = corpus.lengths
    for p in prompts:
        length = _length(p)
        if p.lang not in corpus.langs or (lengths is not None and length not in lengths):
            continue
        key = (length if lengths is not None else "", p.lang)
        group = groups.setdefault(key, [])
        if corpus.limit is None or len(group) < corpus.limit:
            group.append(p)
    where = f"[[corpus]] {corpus.name!r}"
    for lang in corpus.langs:
        for length in lengths or ("",):
            if not groups.get((length, lang)):
                what = f"language {lang!r}" + (f" and length {length!r}" if length else "")
                raise TokenlensError(f"{where}: no prompt of {what} in {corpus.path}")
    return groups


def load_plan(path: Path) -> Plan:
    """Read, validate and expand a plan file."""
    try:
        raw_bytes = path.read_bytes()
    except OSError as exc:
        raise TokenlensError(f"cannot read plan {path}: {exc.strerror}") from None
    try:
        raw = tomllib.loads(raw_bytes.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise TokenlensError(f"{path}: not valid TOML ({exc})") from None
    try:
        return _build(path, raw, hashlib.sha256(raw_bytes).hexdigest())
    except TokenlensError as exc:
        raise TokenlensError(f"{path}: {exc}") from None


def _build(path: Path, raw: dict[str, Any], sha: str) -> Plan:
    _Table("plan", raw, {"bench", "sampling", "model", "method", "corpus"})
    bench = _Table(
        "[bench]",
        raw.get("bench", {}),
        {"name", "description", "warmup", "warmup_tokens", "repeats", "concurrency", "chat"},
    )
    models = [_model(i, d) for i, d in enumerate(_array(raw, "model"))]
    methods = [_method(i, d) for i, d in enumerate(_array(raw, "method"))]
    corpora = [_corpus(i, d, path.parent) for i, d in enumerate(_array(raw, "corpus"))]
    for where, names in (
        ("[[model]]", [m.name for m in models]),
        ("[[method]]", [m.name for m in methods]),
        ("[[corpus]]", [c.name for c in corpora]),
    ):
        unique(where, names)
    known_methods = {m.name: m for m in methods}
    concurrencies = _concurrencies(bench)
    cases: list[Case] = []
    for model in models:
        chosen = (
            [_chosen(model, entry, known_methods) for entry in model.methods]
            if model.methods
            else [(m, m.k) for m in methods]
        )
        for method, ks in chosen:
            for k in ks:
                for corpus in corpora:
                    groups = _select(corpus, read_prompts(corpus.path))
                    chosen_conc = corpus.concurrency or concurrencies
                    tag = len(chosen_conc) > 1
                    for (length, lang), prompts in groups.items():
                        for conc in chosen_conc:
                            cases.append(
                                Case(
                                    len(cases),
                                    model,
                                    method,
                                    k,
                                    corpus,
                                    length,
                                    lang,
                                    tuple(prompts),
                                    conc,
                                    tag,
                                )
                            )
    return Plan(
        path=path,
        sha256=sha,
        name=bench.get("name", str, path.stem),
        description=bench.get("description", str, ""),
        warmup=bench.positive("warmup", 1, minimum=0),
        warmup_tokens=bench.positive("warmup_tokens", 1) if "warmup_tokens" in bench.data else None,
        repeats=bench.positive("repeats", 5),
        concurrency=concurrencies[0],
        chat=bench.get("chat", bool, True),
        sampling=_sampling(raw.get("sampling", {})),
        models=tuple(models),
        methods=tuple(methods),
        corpora=tuple(corpora),
        cases=tuple(cases),
        raw=raw,
        concurrencies=tuple(sorted({c.concurrency for c in cases} or set(concurrencies))),
    )


def _concurrencies(t: _Table) -> tuple[int, ...]:
    """``concurrency = 4`` or ``concurrency = [1, 32]`` (one case per value), of
    ``[bench]`` or of a ``[[corpus]]`` (which overrides the bench's for its cases)."""
    value = t.get("concurrency", (int, list), 1)
    values = [value] if isinstance(value, int) else value
    if not values or not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        raise t.fail("concurrency", "expected a positive integer or a list of them")
    if any(v < 1 for v in values) or len(set(values)) != len(values):
        raise t.fail("concurrency", f"values must be distinct and at least 1: {values}")
    return tuple(values)


def _chosen(
    model: ModelEntry, entry: str, methods: Mapping[str, MethodEntry]
) -> tuple[MethodEntry, tuple[int, ...]]:
    """A ``methods`` entry of a model: ``"name"`` (every k) or ``"name:k1,k2"`` (those k)."""
    where = f"[[model]] {model.name!r}.methods"
    name, _, ks = entry.partition(":")
    if name not in methods:
        raise TokenlensError(f"{where}: no [[method]] named {name!r}")
    method = methods[name]
    if not ks:
        return method, method.k
    try:
        chosen = tuple(int(k) for k in ks.split(","))
    except ValueError:
        raise TokenlensError(f"{where}: {entry!r} is not 'name' or 'name:k1,k2'") from None
    missing = [k for k in chosen if k not in method.k]
    if method.method == BASELINE or missing:
        raise TokenlensError(f"{where}: {entry!r} selects k values the method does not list")
    return method, chosen


def _array(raw: Mapping[str, Any], key: str) -> list[Any]:
    value = raw.get(key)
    if value is None:
        raise TokenlensError(f"needs at least one [[{key}]] table")
    if not isinstance(value, list):
        raise TokenlensError(f"'{key}' must be an array of tables, written [[{key}]]")
    return value
