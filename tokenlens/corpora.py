"""The parallel Japanese/English prompt corpora: where they are, the rules they follow,
and their manifest (see docs/corpora.md).

A study compares Japanese with English on prompts that ask for the same content, so
the corpora are product data with rules of their own: every prompt paired with its
translation, both asking for the output language and the same length, of similar
size, enough pairs per domain and length. Each rule is a ``check_*`` function that
returns a list of problems (empty: the rule holds); :func:`check_corpora` runs them all
on a corpora directory, and ``MANIFEST.json`` records what each file holds with its
hash (:mod:`tokenlens.corpus_manifest`). ``tokenlens corpora check|manifest`` runs them from the
command line; the tests call them directly.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from pathlib import Path

from tokenlens.corpus_manifest import manifest_problems
from tokenlens.errors import TokenlensError
from tokenlens.prompts import Prompt, read_prompts

# The files every corpora directory of tokenlens has.
EXPECTED_FILES = (
    "policy.jsonl",
    "genai.jsonl",
    "chat.jsonl",
    "howto.jsonl",
    "code.jsonl",
    "news.jsonl",
    "translation.jsonl",
    "demo.jsonl",
    "smoke.jsonl",
)


def corpora_dir() -> Path:
    """The corpora shipped with tokenlens. The one place that knows where they live
    (today ``corpora/`` beside the package in the source tree)."""
    return Path(__file__).resolve().parent.parent / "corpora"


# Small files for tests and the CPU demo; everything else is a study corpus.
QUICK = {"demo.jsonl", "smoke.jsonl"}

# Minimum pairs per (domain, length) over the study corpora, and the max_tokens each
# length must use.
MIN_PAIRS = {
    ("policy", "medium"): 5,
    ("policy", "long"): 5,
    ("genai", "medium"): 5,
    ("genai", "long"): 5,
    ("chat", "medium"): 5,
    ("howto", "medium"): 5,
    ("code", "medium"): 5,
    ("news", "medium"): 5,
    ("translation", "medium"): 5,
}
MAX_TOKENS = {"medium": 256, "long": 512}
DEMO_PAIRS = (4, 6)
DEMO_MAX_TOKENS = (64, 96)
SMOKE_MAX_TOKENS = 32

# A source passage (news article, text to translate) sits between two lines of `"""`.
PASSAGE = re.compile(r'^"""\n(.*?)\n"""$', re.M | re.S)
# Domains whose prompts carry exactly one passage, and its language relative to the
# prompt's output language.
PASSAGE_DOMAINS = {"news": "same", "translation": "other"}

JA_MIN_SHARE = 0.4  # kana+kanji share of non-space characters in a Japanese text
EN_MIN_ASCII = 0.98  # ASCII share of non-space characters in an English text
# Size of a text in "English characters": one per ASCII character, JA_CHAR_WEIGHT per
# other character (an English rendering takes ~2-2.5 characters per Japanese one). The
# English and the Japanese side of a pair must be of similar size.
JA_CHAR_WEIGHT = 2.3
SIZE_RATIO = (0.6, 1.6)

JA_TARGET = re.compile(r"約(\d+)(文|行|ステップ)")
EN_TARGET = re.compile(r"\babout (\d+) (?:numbered )?(sentences|lines|steps)\b")
UNIT = {"文": "sentences", "行": "lines", "ステップ": "steps"}


# --- helpers ----------------------------------------------------------------------------


def full_text(p: Prompt) -> str:
    """Everything the model reads: the text, or all message contents."""
    if p.text is not None:
        return p.text
    return "\n".join(m["content"] for m in p.messages or ())


def split(p: Prompt) -> tuple[str, list[str]]:
    """(instruction, passages): the prompt without its quoted passages, and those."""
    text = full_text(p)
    return PASSAGE.sub("", text), PASSAGE.findall(text)


def is_japanese_char(c: str) -> bool:
    """Kana or a CJK ideograph (half-width katakana and extensions included)."""
    o = ord(c)
    return (
        0x3040 <= o <= 0x30FF  # hiragana, katakana
        or 0x31F0 <= o <= 0x31FF  # katakana extensions
        or 0x3400 <= o <= 0x4DBF  # CJK extension A
        or 0x4E00 <= o <= 0x9FFF  # CJK unified ideographs
        or 0xF900 <= o <= 0xFAFF  # CJK compatibility ideographs
        or 0xFF66 <= o <= 0xFF9F  # half-width katakana
    )


def _chars(s: str) -> list[str]:
    return [c for c in s if not c.isspace()]


def japanese_share(s: str) -> float:
    """Share of Japanese characters among the non-space characters of ``s``."""
    chars = _chars(s)
    return sum(map(is_japanese_char, chars)) / len(chars) if chars else 0.0


def ascii_share(s: str) -> float:
    """Share of ASCII characters among the non-space characters of ``s``."""
    chars = _chars(s)
    return sum(c.isascii() for c in chars) / len(chars) if chars else 0.0


def size(s: str) -> float:
    """``s`` in English characters (see :data:`JA_CHAR_WEIGHT`)."""
    return sum(1.0 if c.isascii() else JA_CHAR_WEIGHT for c in _chars(s))


def language_problems(s: str, lang: str, what: str) -> list[str]:
    """Whether ``s`` is Japanese (kana/kanji dominant) or English (ASCII dominant)."""
    if lang == "ja":
        share = japanese_share(s)
        if share < JA_MIN_SHARE:
            return [f"{what}: kana/kanji share {share:.2f} < {JA_MIN_SHARE}, not Japanese"]
        return []
    if lang == "en":
        out = []
        share = ascii_share(s)
        if share < EN_MIN_ASCII:
            out.append(f"{what}: ASCII share {share:.3f} < {EN_MIN_ASCII}, not English")
        jp = sorted({c for c in s if is_japanese_char(c)})
        if jp:
            out.append(f"{what}: contains Japanese characters {''.join(jp[:10])!r}")
        return out
    return [f"{what}: unexpected language {lang!r}"]


def tag(p: Prompt, key: str) -> object:
    """``tags[key]``, or None (no tags, or tags that are not an object)."""
    return p.tags.get(key) if isinstance(p.tags, dict) else None


def targets(p: Prompt) -> set[tuple[int, str]]:
    """The output length a prompt asks for, e.g. {(7, 'sentences')}."""
    instruction, _ = split(p)
    if p.lang == "ja":
        return {(int(n), UNIT[u]) for n, u in JA_TARGET.findall(instruction)}
    return {(int(n), u) for n, u in EN_TARGET.findall(instruction)}


def by_pair(prompts: list[Prompt]) -> dict[str, list[Prompt]]:
    """The prompts of each ``pair`` value (unpaired prompts left out)."""
    groups: dict[str, list[Prompt]] = defaultdict(list)
    for p in prompts:
        if p.pair is not None:
            groups[p.pair].append(p)
    return groups


def complete_pairs(prompts: list[Prompt]) -> list[tuple[Prompt, Prompt]]:
    """(ja, en) for every pair that has exactly one of each."""
    out = []
    for group in by_pair(prompts).values():
        ja = [p for p in group if p.lang == "ja"]
        en = [p for p in group if p.lang == "en"]
        if len(group) == 2 and len(ja) == 1 and len(en) == 1:
            out.append((ja[0], en[0]))
    return out


# --- rules: each returns a list of problems, empty when the corpus follows it -----------


def check_unique(corpora: dict[str, list[Prompt]]) -> list[str]:
    """Ids are unique across all files, and a pair never spans two files."""
    problems = []
    ids = Counter(p.id for ps in corpora.values() for p in ps)
    problems += [f"id {i!r} used {n} times" for i, n in sorted(ids.items()) if n > 1]
    pair_files: dict[str, set[str]] = defaultdict(set)
    for name, ps in corpora.items():
        for p in ps:
            if p.pair is not None:
                pair_files[p.pair].add(name)
    problems += [
        f"pair {k!r} spans {sorted(v)}" for k, v in sorted(pair_files.items()) if len(v) > 1
    ]
    return problems


def check_pairing(prompts: list[Prompt]) -> list[str]:
    """Every prompt is paired; every pair is one ja + one en with the same settings."""
    problems = []
    for p in prompts:
        if p.pair is None:
            problems.append(f"{p.id}: no 'pair'")
        if p.lang not in ("ja", "en"):
            problems.append(f"{p.id}: lang {p.lang!r} is not ja or en")
        if p.max_tokens is None:
            problems.append(f"{p.id}: no 'max_tokens'")
        for key in ("domain", "length"):
            if not isinstance(tag(p, key), str):
                problems.append(f"{p.id}: no string tags.{key}")
    for key, group in sorted(by_pair(prompts).items()):
        langs = sorted(p.lang for p in group)
        if langs != ["en", "ja"]:
            problems.append(f"pair {key!r}: languages {langs}, want exactly one ja and one en")
            continue
        a, b = group
        if a.max_tokens != b.max_tokens:
            problems.append(f"pair {key!r}: max_tokens {a.max_tokens} vs {b.max_tokens}")
        for t in ("domain", "length", "topic"):
            if tag(a, t) != tag(b, t):
                problems.append(f"pair {key!r}: tags.{t} {tag(a, t)!r} vs {tag(b, t)!r}")
        if (a.messages is None) != (b.messages is None):
            problems.append(f"pair {key!r}: one prompt is chat messages, the other plain text")
        elif a.messages is not None and b.messages is not None:
            roles_a = [m["role"] for m in a.messages]
            roles_b = [m["role"] for m in b.messages]
            if roles_a != roles_b:
                problems.append(f"pair {key!r}: message roles {roles_a} vs {roles_b}")
    return problems


def check_languages(prompts: list[Prompt]) -> list[str]:
    """Instruction in the output language, asking for that language; passages as declared."""
    problems = []
    for p in prompts:
        instruction, passages = split(p)
        problems += language_problems(instruction, p.lang, f"{p.id} instruction")
        if p.lang == "ja" and "日本語" not in instruction:
            problems.append(f"{p.id}: a ja prompt must ask for Japanese output (日本語)")
        if p.lang == "en" and "English" not in instruction:
            problems.append(f"{p.id}: an en prompt must ask for English output")
        domain = tag(p, "domain")
        rule = PASSAGE_DOMAINS.get(domain) if isinstance(domain, str) else None
        if rule is None:
            if passages:
                problems.append(f"{p.id}: a {domain} prompt has a quoted passage")
            continue
        if len(passages) != 1:
            problems.append(
                f"{p.id}: a {domain} prompt needs exactly one quoted passage, has {len(passages)}"
            )
            continue
        want = p.lang if rule == "same" else {"ja": "en", "en": "ja"}.get(p.lang, "?")
        problems += language_problems(passages[0], want, f"{p.id} passage")
        if rule == "other":
            direction = f"{want}-{p.lang}"
            if tag(p, "direction") != direction:
                problems.append(
                    f"{p.id}: tags.direction {tag(p, 'direction')!r}, want {direction!r}"
                )
    return problems


def check_balance(prompts: list[Prompt]) -> list[str]:
    """Within a pair the same content is asked for: same length target, similar size."""
    problems = []
    for ja, en in complete_pairs(prompts):
        key = ja.pair
        tj, te = targets(ja), targets(en)
        if tj != te:
            problems.append(
                f"pair {key!r}: length targets differ: ja {sorted(tj)} vs en {sorted(te)}"
            )
        if tag(ja, "length") in MAX_TOKENS and tag(ja, "domain") != "translation" and not tj:
            problems.append(f"pair {key!r}: no explicit output length (約N文 / about N sentences)")
        (ja_instr, ja_pass), (en_instr, en_pass) = split(ja), split(en)
        texts = [("instruction", en_instr, ja_instr)]
        if len(ja_pass) == 1 and len(en_pass) == 1:
            # news: each prompt quotes an article in its own language; translation: the
            # ja prompt quotes the English source and the en prompt the Japanese one.
            if tag(ja, "domain") == "translation":
                texts.append(("passage", ja_pass[0], en_pass[0]))
            else:
                texts.append(("passage", en_pass[0], ja_pass[0]))
        for what, english, japanese in texts:
            ratio = size(english) / max(1.0, size(japanese))
            if not SIZE_RATIO[0] <= ratio <= SIZE_RATIO[1]:
                problems.append(
                    f"pair {key!r}: {what} English/Japanese size ratio {ratio:.2f} "
                    f"outside {SIZE_RATIO}: not the same content?"
                )
    return problems


def check_study_counts(corpora: dict[str, list[Prompt]]) -> list[str]:
    """Enough pairs per domain and length, with the max_tokens of that length."""
    problems = []
    counts: Counter[tuple[str, str]] = Counter()
    for name, ps in corpora.items():
        if name in QUICK:
            continue
        for p in ps:
            length = tag(p, "length")
            if not isinstance(length, str) or length not in MAX_TOKENS:
                problems.append(
                    f"{name}: {p.id}: tags.length {length!r} not in {sorted(MAX_TOKENS)}"
                )
            elif p.max_tokens != MAX_TOKENS[length]:
                problems.append(
                    f"{name}: {p.id}: max_tokens {p.max_tokens}, {length} uses {MAX_TOKENS[length]}"
                )
        for ja, _ in complete_pairs(ps):
            counts[(str(tag(ja, "domain")), str(tag(ja, "length")))] += 1
    for key, minimum in sorted(MIN_PAIRS.items()):
        if counts[key] < minimum:
            problems.append(f"{key[0]}/{key[1]}: {counts[key]} complete pairs, need >= {minimum}")
    return problems


def check_demo(prompts: list[Prompt]) -> list[str]:
    """demo.jsonl: a few pairs across domains, short enough for the CPU demo."""
    pairs = complete_pairs(prompts)
    problems = []
    if not DEMO_PAIRS[0] <= len(pairs) <= DEMO_PAIRS[1]:
        problems.append(f"demo: {len(pairs)} pairs, want {DEMO_PAIRS[0]}..{DEMO_PAIRS[1]}")
    domains = {tag(ja, "domain") for ja, _ in pairs}
    if len(domains) < 3:
        problems.append(
            f"demo: only domains {sorted(map(str, domains))}, want pairs across domains"
        )
    for p in prompts:
        if p.max_tokens is None or not DEMO_MAX_TOKENS[0] <= p.max_tokens <= DEMO_MAX_TOKENS[1]:
            problems.append(f"demo: {p.id}: max_tokens {p.max_tokens} outside {DEMO_MAX_TOKENS}")
    return problems


def check_smoke(prompts: list[Prompt]) -> list[str]:
    """smoke.jsonl: one ja and one en prompt, 32 tokens each."""
    problems = []
    langs = sorted(p.lang for p in prompts)
    if langs != ["en", "ja"]:
        problems.append(f"smoke: languages {langs}, want one ja and one en prompt")
    problems += [
        f"smoke: {p.id}: max_tokens {p.max_tokens}, want {SMOKE_MAX_TOKENS}"
        for p in prompts
        if p.max_tokens != SMOKE_MAX_TOKENS
    ]
    return problems


def check_file_domains(corpora: dict[str, list[Prompt]]) -> list[str]:
    """Each study file holds only its own domain (the file's stem)."""
    problems = []
    for name, prompts in sorted(corpora.items()):
        if name in QUICK:
            continue
        domains = sorted({str(tag(p, "domain")) for p in prompts})
        if domains != [Path(name).stem]:
            problems.append(f"{name}: domains {domains}, want only {Path(name).stem!r}")
    return problems


def check_files_present(names: set[str]) -> list[str]:
    """Every file of :data:`EXPECTED_FILES` is there."""
    return [f"{name}: missing" for name in EXPECTED_FILES if name not in names]


def check_lines(path: Path, prompts: list[Prompt]) -> list[str]:
    """A prompt file has no blank line and nothing the reader skipped."""
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    problems = [] if prompts else [f"{path.name}: no prompts"]
    if len(lines) != len(prompts):
        problems.append(f"{path.name}: {len(lines)} non-blank lines but {len(prompts)} prompts")
    if len(lines) != len(path.read_text(encoding="utf-8").splitlines()):
        problems.append(f"{path.name}: blank lines")
    return problems


# --- all of it -------------------------------------------------------------------------


def check_corpora(directory: Path | None = None) -> list[str]:
    """Every rule on every file of ``directory`` (default :func:`corpora_dir`), and
    whether its manifest is up to date. An empty list: all is well."""
    directory = directory or corpora_dir()
    problems: list[str] = []
    corpora: dict[str, list[Prompt]] = {}
    for path in sorted(directory.glob("*.jsonl")):
        try:
            corpora[path.name] = read_prompts(path)
        except TokenlensError as exc:
            problems.append(str(exc))
            continue
        problems += check_lines(path, corpora[path.name])
    problems += check_files_present(set(corpora))
    problems += check_unique(corpora)
    for name, prompts in sorted(corpora.items()):
        for rule in (check_pairing, check_languages, check_balance):
            problems += [f"{name}: {p}" for p in rule(prompts)]
    problems += check_study_counts(corpora)
    problems += check_file_domains(corpora)
    if "demo.jsonl" in corpora:
        problems += check_demo(corpora["demo.jsonl"])
    if "smoke.jsonl" in corpora:
        problems += check_smoke(corpora["smoke.jsonl"])
    if corpora:
        problems += manifest_problems(directory)
    return problems
