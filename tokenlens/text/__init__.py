"""Text layer: token ids -> bytes, characters, morphemes and classes.

The analysis stage needs one call per generated request::

    from tokenlens.text import classify_tokens
    table = classify_tokens(output_token_ids, "qwen3.5", lang="ja")

which returns a :class:`pyarrow.Table` with one row per token (schema
:data:`TOKEN_SCHEMA`). :func:`dictionary_identity` and ``Vocabulary.identity`` go into
reproducibility signatures. ``tokenlens tokens`` is :func:`run_tokens_study`.
"""

from tokenlens.text.classify import (
    BOUNDARIES,
    CLASS_COLUMNS,
    SCRIPTS,
    TOKEN_SCHEMA,
    classify_requests,
    classify_tokens,
)
from tokenlens.text.morph import Units, dictionary_identity, segment
from tokenlens.text.spans import Spans, display_texts, token_spans
from tokenlens.text.study import TokensConfig, TokensResult, run_tokens_study
from tokenlens.text.tokenizers import BUILTIN_NAMES, Vocabulary, load_tokenizer

__all__ = [
    "BOUNDARIES",
    "BUILTIN_NAMES",
    "CLASS_COLUMNS",
    "SCRIPTS",
    "TOKEN_SCHEMA",
    "Spans",
    "TokensConfig",
    "TokensResult",
    "Units",
    "Vocabulary",
    "classify_requests",
    "classify_tokens",
    "dictionary_identity",
    "display_texts",
    "load_tokenizer",
    "run_tokens_study",
    "segment",
    "token_spans",
]
