"""``tokenlens tokens``: the tokenizer-only study (no model, no GPU, offline)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from tokenlens.cli.common import add_progress_flag, corpus_file, progress_for, say

DESCRIPTION = """\
Tokenise every prompt of a corpus and classify every token, without running a model.

Each token gets its UTF-8 byte span and character span in the prompt text, a script
class (hiragana, katakana, kanji, latin, digit, punct, space, symbol, other, mixed,
byte_fragment), its part of speech (UniDic pos1/pos2 via MeCab for Japanese; function
or content word for English), whether it carries a particle, and how it sits against
morpheme/word boundaries (same, inside, spans, crosses, fragment). Per language the
study reports characters and bytes per token and the share of each class: the
tokenizer's part of why Japanese drafts are harder to accept.

Writes DIR/tokens.parquet (one row per token), DIR/summary.json (per language,
under "by_lang") and DIR/tokens.md (Japanese and English side by side).
"""

EPILOG = """\
examples:
  tokenlens tokens --corpus corpora/demo.jsonl --tokenizer qwen3.5 --out out/tok
  tokenlens tokens --corpus my.jsonl --tokenizer qwen2.5 --out out/tok-q25
  tokenlens tokens --corpus my.jsonl --tokenizer ~/models/Qwen3-8B --out out/tok-hf
  tokenlens tokens --corpus corpora/policy.jsonl --out out/tok --quiet   (no progress bars)

--tokenizer takes a built-in offline name (qwen3.5, qwen3.6, qwen2.5, qwen2, qwen3)
or a path to a Hugging Face tokenizer.json or a directory holding one. Language tags
are grouped by their primary subtag (ja, JA and ja-JP are one language), as analyze does.
"""


def register(subparsers: Any) -> None:
    """Add the ``tokens`` subcommand to the root parser's subparsers."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "tokens",
        help="tokenizer-only study: classes of every token, no model run",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--corpus",
        required=True,
        type=corpus_file,
        metavar="FILE.jsonl",
        help="prompt file (JSONL: id, lang, text or messages)",
    )
    parser.add_argument(
        "--tokenizer",
        default="qwen3.5",
        metavar="T",
        help="built-in name or tokenizer.json path (default: %(default)s)",
    )
    parser.add_argument(
        "--out",
        required=True,
        type=Path,
        metavar="DIR",
        help="output directory (created if missing)",
    )
    add_progress_flag(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Parse the options into a config and run the study; print where it wrote."""
    from tokenlens.text.study import TokensConfig, run_tokens_study

    config = TokensConfig(corpus=args.corpus, tokenizer=args.tokenizer, out=args.out)
    progress = progress_for(args)
    try:
        result = run_tokens_study(config, progress=progress)
    finally:
        progress.close()
    say(str(result.markdown_path.parent))
    return 0
