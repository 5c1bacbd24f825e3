"""The tokenizer-only study behind ``tokenlens tokens``: no model, no GPU.

For every prompt of a corpus: tokenise its text with the chosen tokenizer, classify
every token (:func:`tokenlens.text.classify.classify_tokens`) and write

- ``tokens.parquet``: one row per token, ``prompt_id`` and ``lang`` first, then
  :data:`~tokenlens.text.classify.TOKEN_SCHEMA`;
- ``summary.json``: the signature and, under ``by_lang``, per language: characters and
  bytes per token, shares by script and by boundary, byte-fragment share, particle and
  particle-fusion shares, the most common script transitions;
- ``tokens.md``: the headline figures, Japanese and English side by side.

This is the H1 baseline: how much harder Japanese text is *for the tokenizer* before
any drafter is involved.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tokenlens import __version__
from tokenlens.errors import TokenlensError
from tokenlens.format_version import TOKENS, stamp
from tokenlens.progress import SILENT, Progress
from tokenlens.prompts import Prompt, corpus_hash, read_prompts
from tokenlens.signature import make_signature
from tokenlens.text.classify import BOUNDARIES, SCRIPTS, classify_requests
from tokenlens.text.morph import dictionary_identity, is_japanese
from tokenlens.text.tokenizers import load_tokenizer

__all__ = ["TokensConfig", "TokensResult", "prompt_text", "run_tokens_study", "summarize"]


@dataclass(frozen=True)
class TokensConfig:
    """What ``tokenlens tokens`` was asked to do."""

    corpus: Path
    tokenizer: str = "qwen3.5"
    out: Path = Path("out/tokens")


@dataclass(frozen=True)
class TokensResult:
    """Where the study wrote its files, and the summary it wrote."""

    tokens_path: Path
    summary_path: Path
    markdown_path: Path
    summary: dict[str, Any]


def prompt_text(prompt: Prompt) -> str:
    """The text a prompt contributes: ``text``, or its message contents joined by newlines."""
    if prompt.text is not None:
        return prompt.text
    return "\n".join(m["content"] for m in prompt.messages or ())


def run_tokens_study(config: TokensConfig, progress: Progress = SILENT) -> TokensResult:
    """Tokenise and classify every prompt of the corpus; write the three outputs.

    Language tags arrive normalised by :func:`tokenlens.prompts.normalise_lang` (``ja``,
    ``JA`` and ``ja-JP`` are one language, as in analyze); empty message contents are
    refused when the corpus is read.
    """
    if config.out.exists() and not config.out.is_dir():
        raise TokenlensError(f"--out {config.out} is a file, not a directory")
    prompts = read_prompts(config.corpus)
    vocab = load_tokenizer(config.tokenizer)
    dictionary = dictionary_identity() if any(is_japanese(p.lang) for p in prompts) else ""
    requests: list[tuple[list[int], str]] = []
    changed = 0
    progress.stage("tokenise", total=len(prompts), unit="prompt")
    for prompt in prompts:
        text = prompt_text(prompt)
        ids = vocab.encode(text)
        if b"".join(vocab.pieces(ids)) != text.encode("utf-8"):
            changed += 1  # the tokenizer normalised the text (Qwen: NFC)
        requests.append((ids, prompt.lang))
        progress.advance(1)
    progress.stage("classify", total=None)
    # One batched call per language: the per-call overhead is paid once, not per prompt.
    table = classify_requests(requests, vocab)
    req = table.column("request_index")
    prompt_ids = pa.array([p.id for p in prompts], pa.string())
    langs = pa.array([p.lang for p in prompts], pa.string())
    tokens = table.drop_columns(["request_index"])
    tokens = tokens.add_column(0, "lang", langs.take(req))
    tokens = tokens.add_column(0, "prompt_id", prompt_ids.take(req))
    # The same key:value|... form as every run, analysis and bench signature, so that
    # parse_signature reads it; "study" names what wrote it.
    fields: dict[str, Any] = {"tokenlens": __version__, "tokenizer": vocab.identity}
    if dictionary:
        fields["dict"] = dictionary
    fields["corpus"] = corpus_hash(config.corpus)[:12]
    fields["study"] = "tokens"
    signature = make_signature(fields)
    summary: dict[str, Any] = {
        **stamp(TOKENS),
        "signature": signature,
        "tokenlens_version": __version__,
        "tokenizer": vocab.identity,
        "dictionary": dictionary,
        "corpus": str(config.corpus),
        "corpus_hash": corpus_hash(config.corpus),
        "texts_normalized_by_tokenizer": changed,
        "by_lang": summarize(tokens),
    }
    try:
        config.out.mkdir(parents=True, exist_ok=True)
        tokens_path = config.out / "tokens.parquet"
        pq.write_table(tokens, tokens_path)
        summary_path = config.out / "summary.json"
        summary_path.write_text(
            json.dumps(summary, ensure_ascii=False, indent=2) + "\n", encoding="utf-8"
        )
        markdown_path = config.out / "tokens.md"
        markdown_path.write_text(render_markdown(summary), encoding="utf-8")
    except OSError as exc:
        raise TokenlensError(f"cannot write to {config.out}: {exc.strerror or exc}") from None
    return TokensResult(tokens_path, summary_path, markdown_path, summary)


def _shares(column: pa.ChunkedArray, names: tuple[str, ...]) -> dict[str, float]:
    total = len(column)
    counts = Counter(column.to_pylist())
    return {name: (counts.get(name, 0) / total if total else 0.0) for name in names}


def summarize(tokens: pa.Table) -> dict[str, dict[str, Any]]:
    """Per-language figures of a tokens table (needs ``lang``, ``prompt_id``, classes)."""
    out: dict[str, dict[str, Any]] = {}
    for lang in _lang_order(tokens.column("lang").unique().to_pylist()):
        t = tokens.filter(pc.equal(tokens.column("lang"), lang))
        n = t.num_rows
        n_chars = n_bytes = 0
        by_prompt = t.group_by("prompt_id").aggregate([("char_end", "max"), ("byte_end", "max")])
        n_chars = int(pc.sum(by_prompt.column("char_end_max")).as_py() or 0)
        n_bytes = int(pc.sum(by_prompt.column("byte_end_max")).as_py() or 0)
        scripts = _shares(t.column("script"), SCRIPTS)
        transitions = Counter(x for x in t.column("transition").to_pylist() if x)
        particle = int(pc.sum(t.column("is_particle")).as_py() or 0)
        fused = int(pc.sum(t.column("particle_fused")).as_py() or 0)
        ranks = t.column("bpe_rank").drop_null()
        out[lang] = {
            "prompts": by_prompt.num_rows,
            "tokens": n,
            "chars": n_chars,
            "bytes": n_bytes,
            "chars_per_token": n_chars / n if n else 0.0,
            "bytes_per_token": n_bytes / n if n else 0.0,
            "share_by_script": scripts,
            "share_by_boundary": _shares(t.column("boundary"), BOUNDARIES),
            "byte_fragment_share": scripts["byte_fragment"],
            "particle_share": particle / n if n else 0.0,
            "particle_fusion_share": fused / n if n else 0.0,
            "fused_share_of_particle_tokens": fused / particle if particle else 0.0,
            "word_initial_share": (int(pc.sum(t.column("morph_initial")).as_py() or 0) / n)
            if n
            else 0.0,
            "top_transitions": {k: v / n for k, v in transitions.most_common(8)},
            "bpe_rank_median": float(pc.approximate_median(ranks).as_py() or 0)
            if len(ranks)
            else None,
        }
    return out


def _lang_order(langs: list[str]) -> list[str]:
    first = [lang for lang in ("ja", "en") if lang in langs]
    return first + sorted(lang for lang in langs if lang not in first)


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def render_markdown(summary: dict[str, Any]) -> str:
    """A short side-by-side table of the headline figures."""
    by_lang: dict[str, dict[str, Any]] = summary["by_lang"]
    langs = list(by_lang)
    rows: list[tuple[str, list[str]]] = [
        ("prompts", [str(by_lang[x]["prompts"]) for x in langs]),
        ("tokens", [str(by_lang[x]["tokens"]) for x in langs]),
        ("characters per token", [f"{by_lang[x]['chars_per_token']:.2f}" for x in langs]),
        ("UTF-8 bytes per token", [f"{by_lang[x]['bytes_per_token']:.2f}" for x in langs]),
        ("byte-fragment share", [_pct(by_lang[x]["byte_fragment_share"]) for x in langs]),
        ("particle / function-word share", [_pct(by_lang[x]["particle_share"]) for x in langs]),
        ("particle-fusion share", [_pct(by_lang[x]["particle_fusion_share"]) for x in langs]),
        ("word-initial share", [_pct(by_lang[x]["word_initial_share"]) for x in langs]),
    ]
    for s in SCRIPTS:
        vals = [by_lang[x]["share_by_script"][s] for x in langs]
        if any(vals):
            rows.append((f"script: {s}", [_pct(v) for v in vals]))
    for b in BOUNDARIES:
        vals = [by_lang[x]["share_by_boundary"][b] for x in langs]
        rows.append((f"boundary: {b}", [_pct(v) for v in vals]))
    lines = [
        "# Tokenizer study",
        "",
        f"`{summary['signature']}`",
        "",
        "| measure | " + " | ".join(langs) + " |",
        "|---|" + "---:|" * len(langs),
    ]
    lines += [f"| {name} | " + " | ".join(vals) + " |" for name, vals in rows]
    lines += [
        "",
        "Shares are of all tokens of the language. *Particle-fusion*: one token holds a "
        "particle (English: a function word) together with (part of) another word, "
        "e.g. を導入. See docs/text.md for the class rules.",
        "",
    ]
    return "\n".join(lines)
