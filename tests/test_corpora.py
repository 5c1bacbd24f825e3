"""The parallel Japanese/English prompt corpora in ``corpora/`` (see docs/corpora.md).

Each rule is a ``check_*`` function that returns a list of problems. The real corpora
must give none; every rule also has a test that feeds it a broken corpus and expects a
problem, so no check can pass vacuously.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from tokenlens.prompts import Prompt, read_prompts

REPO = Path(__file__).resolve().parent.parent
CORPORA = REPO / "corpora"
MANIFEST = CORPORA / "MANIFEST.json"
FILES = sorted(CORPORA.glob("*.jsonl"))

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


# ----------------------------------------------------------------------------- helpers


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
    chars = _chars(s)
    return sum(map(is_japanese_char, chars)) / len(chars) if chars else 0.0


def ascii_share(s: str) -> float:
    chars = _chars(s)
    return sum(c.isascii() for c in chars) / len(chars) if chars else 0.0


def size(s: str) -> float:
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
    return p.tags.get(key) if isinstance(p.tags, dict) else None


def targets(p: Prompt) -> set[tuple[int, str]]:
    """The output length a prompt asks for, e.g. {(7, 'sentences')}."""
    instruction, _ = split(p)
    if p.lang == "ja":
        return {(int(n), UNIT[u]) for n, u in JA_TARGET.findall(instruction)}
    return {(int(n), u) for n, u in EN_TARGET.findall(instruction)}


def by_pair(prompts: list[Prompt]) -> dict[str, list[Prompt]]:
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


# ------------------------------------------------------------------------------ checks


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
            if length not in MAX_TOKENS:
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


def _load_manifest_script():
    spec = importlib.util.spec_from_file_location(
        "corpora_manifest", REPO / "scripts" / "corpora_manifest.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ----------------------------------------------------------------- the real corpora


@pytest.fixture(scope="module")
def corpora() -> dict[str, list[Prompt]]:
    return {f.name: read_prompts(f) for f in FILES}


def test_files_present():
    names = {f.name for f in FILES}
    expected = {
        "policy.jsonl",
        "genai.jsonl",
        "chat.jsonl",
        "howto.jsonl",
        "code.jsonl",
        "news.jsonl",
        "translation.jsonl",
        "demo.jsonl",
        "smoke.jsonl",
    }
    assert expected <= names, f"missing corpora: {sorted(expected - names)}"


@pytest.mark.parametrize("path", FILES, ids=[f.name for f in FILES])
def test_file_parses(path):
    prompts = read_prompts(path)  # raises TokenlensError naming the bad line
    assert prompts, f"{path.name} is empty"
    raw = [
        json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()
    ]
    assert len(raw) == len(prompts), f"{path.name}: blank or unparsed lines"


def test_unique_ids_and_pairs(corpora):
    assert check_unique(corpora) == []


@pytest.mark.parametrize("name", [f.name for f in FILES])
def test_pairing(corpora, name):
    assert check_pairing(corpora[name]) == []


@pytest.mark.parametrize("name", [f.name for f in FILES])
def test_languages(corpora, name):
    assert check_languages(corpora[name]) == []


@pytest.mark.parametrize("name", [f.name for f in FILES])
def test_balance(corpora, name):
    assert check_balance(corpora[name]) == []


def test_study_counts(corpora):
    assert check_study_counts(corpora) == []


def test_study_files_hold_one_domain(corpora):
    for name, prompts in corpora.items():
        if name in QUICK:
            continue
        domains = {tag(p, "domain") for p in prompts}
        assert domains == {Path(name).stem}, f"{name}: domains {domains}"


def test_demo(corpora):
    assert check_demo(corpora["demo.jsonl"]) == []


def test_smoke(corpora):
    assert check_smoke(corpora["smoke.jsonl"]) == []


def test_manifest_matches_files():
    mod = _load_manifest_script()
    fresh = mod.build_manifest(CORPORA)
    stored_text = MANIFEST.read_text(encoding="utf-8")
    assert mod.diff(fresh, json.loads(stored_text)) == [], "run scripts/corpora_manifest.py"
    assert stored_text == mod.render(fresh)
    assert mod.main(["--check"]) == 0


# ------------------------------------------------------ each check can fail
# A minimal good pair passes every check; each broken variant below must produce the
# problem named by its expected message fragment.


def mk(pid, lang, text, pair="x-01", max_tokens=256, domain="chat", length="medium", **tags):
    return Prompt(
        id=pid,
        lang=lang,
        text=text,
        pair=pair,
        max_tokens=max_tokens,
        tags={"domain": domain, "length": length, "topic": "t", **tags},
    )


JA_OK = "週末の過ごし方を、日本語で約6文で提案してください。"
EN_OK = "Suggest how to spend the weekend, in English and in about 6 sentences."


def good_pair(**kw):
    return [mk("x-01-ja", "ja", JA_OK, **kw), mk("x-01-en", "en", EN_OK, **kw)]


def has(problems: list[str], fragment: str) -> bool:
    return any(fragment in m for m in problems)


def test_good_pair_passes_every_check():
    ps = good_pair()
    assert check_pairing(ps) == []
    assert check_languages(ps) == []
    assert check_balance(ps) == []
    assert check_unique({"a.jsonl": ps}) == []


def test_check_unique_fails():
    a, b = good_pair()
    assert has(check_unique({"a.jsonl": [a, b], "b.jsonl": [a]}), "used 2 times")
    c = mk("y-01-ja", "ja", JA_OK, pair="x-01")
    assert has(check_unique({"a.jsonl": [a, b], "b.jsonl": [c]}), "spans")


EN_AS_MESSAGES = Prompt(
    id="x-01-en",
    lang="en",
    messages=({"role": "user", "content": EN_OK},),
    pair="x-01",
    max_tokens=256,
    tags={"domain": "chat", "length": "medium", "topic": "t"},
)


@pytest.mark.parametrize(
    ("mutate", "fragment"),
    [
        pytest.param(lambda ja, en: [ja, mk("x-01-en", "ja", JA_OK)], "languages", id="two-ja"),
        pytest.param(lambda ja, en: [ja], "languages", id="ja-only"),
        pytest.param(lambda ja, en: [ja, en, mk("x-01-en2", "en", EN_OK)], "languages", id="three"),
        pytest.param(lambda ja, en: [ja, mk("x-01-en", "fr", EN_OK)], "not ja or en", id="fr"),
        pytest.param(
            lambda ja, en: [ja, mk("x-01-en", "en", EN_OK, max_tokens=512)],
            "max_tokens 256 vs 512",
            id="max-tokens",
        ),
        pytest.param(
            lambda ja, en: [ja, mk("x-01-en", "en", EN_OK, domain="policy")],
            "tags.domain",
            id="domain",
        ),
        pytest.param(
            lambda ja, en: [ja, mk("x-01-en", "en", EN_OK, length="long")],
            "tags.length",
            id="length",
        ),
        pytest.param(
            lambda ja, en: [ja, mk("x-01-en", "en", EN_OK, pair=None)], "no 'pair'", id="unpaired"
        ),
        pytest.param(
            lambda ja, en: [ja, mk("x-01-en", "en", EN_OK, max_tokens=None)],
            "no 'max_tokens'",
            id="no-max-tokens",
        ),
        pytest.param(
            lambda ja, en: [
                ja,
                Prompt(id="x-01-en", lang="en", text=EN_OK, pair="x-01", max_tokens=256),
            ],
            "no string tags.domain",
            id="no-tags",
        ),
        pytest.param(lambda ja, en: [ja, EN_AS_MESSAGES], "chat messages", id="mixed-forms"),
    ],
)
def test_check_pairing_fails(mutate, fragment):
    assert has(check_pairing(mutate(*good_pair())), fragment)


def test_check_pairing_fails_on_message_roles():
    def chat(pid, lang, roles):
        msgs = tuple({"role": r, "content": JA_OK if lang == "ja" else EN_OK} for r in roles)
        return Prompt(
            id=pid,
            lang=lang,
            messages=msgs,
            pair="x-01",
            max_tokens=256,
            tags={"domain": "chat", "length": "medium", "topic": "t"},
        )

    ja = chat("x-01-ja", "ja", ["system", "user"])
    en = chat("x-01-en", "en", ["user"])
    assert has(check_pairing([ja, en]), "message roles")


SRC_EN = '\n"""\nSpend the weekend well.\n"""'
SRC_JA = '\n"""\n市は10日、図書館の開館時間を延長すると発表した。\n"""'


@pytest.mark.parametrize(
    ("prompt", "fragment"),
    [
        pytest.param(
            mk("a", "ja", "Suggest a weekend plan in about 6 sentences, 日本語."),
            "not Japanese",
            id="english-tagged-ja",
        ),
        pytest.param(
            mk("a", "ja", "週末の過ごし方を約6文で提案してください。"),
            "must ask for Japanese",
            id="ja-no-request",
        ),
        pytest.param(
            mk("a", "en", "週末の過ごし方を英語（English）で約6文で提案してください。"),
            "not English",
            id="japanese-tagged-en",
        ),
        pytest.param(
            mk("a", "en", "Suggest how to spend the weekend in about 6 sentences."),
            "must ask for English",
            id="en-no-request",
        ),
        pytest.param(
            mk("a", "en", "Explain what 生成AI means, in English and in about 6 sentences."),
            "contains Japanese characters",
            id="kanji-in-english",
        ),
        pytest.param(
            mk(
                "a",
                "ja",
                "日本語に翻訳してください。" + SRC_JA,
                domain="translation",
                direction="en-ja",
            ),
            "passage",
            id="translation-source-same-language",
        ),
        pytest.param(
            mk(
                "a",
                "ja",
                "次の英文を日本語に翻訳してください。",
                domain="translation",
                direction="en-ja",
            ),
            "exactly one quoted passage",
            id="translation-no-source",
        ),
        pytest.param(
            mk(
                "a",
                "ja",
                "日本語に翻訳してください。" + SRC_EN,
                domain="translation",
                direction="ja-en",
            ),
            "tags.direction",
            id="translation-direction",
        ),
        pytest.param(
            mk("a", "en", "Summarise this in English." + SRC_JA, domain="news"),
            "passage",
            id="news-article-other-language",
        ),
        pytest.param(
            mk("a", "en", "Suggest a plan in English." + SRC_EN),
            "has a quoted passage",
            id="passage-where-none-belongs",
        ),
    ],
)
def test_check_languages_fails(prompt, fragment):
    assert has(check_languages([prompt]), fragment)


@pytest.mark.parametrize(
    ("en_text", "fragment"),
    [
        pytest.param(
            "Suggest how to spend the weekend, in English and in about 8 sentences.",
            "length targets differ",
            id="other-count",
        ),
        pytest.param(
            "Suggest how to spend the weekend, in English and in about 6 lines.",
            "length targets differ",
            id="other-unit",
        ),
        pytest.param(
            "Suggest how to spend the weekend, in English, briefly please.",
            "length targets differ",
            id="no-target",
        ),
        pytest.param(
            "Suggest, in English and in about 6 sentences, how to spend the weekend, a long "
            "holiday, a rainy evening, a snowy morning, a trip to the sea, a day in the "
            "mountains, and a quiet afternoon at home with friends and family.",
            "size ratio",
            id="different-content",
        ),
    ],
)
def test_check_balance_fails(en_text, fragment):
    ja = mk("x-01-ja", "ja", JA_OK)
    assert has(check_balance([ja, mk("x-01-en", "en", en_text)]), fragment)


def test_check_balance_requires_a_target():
    ja = mk("x-01-ja", "ja", "週末の過ごし方を日本語で提案してください。")
    en = mk("x-01-en", "en", "Suggest how to spend the weekend in English.")
    assert has(check_balance([ja, en]), "no explicit output length")


def test_check_study_counts_fails(corpora):
    short = dict(corpora)
    short["policy.jsonl"] = [p for p in corpora["policy.jsonl"] if tag(p, "length") != "long"]
    assert has(check_study_counts(short), "policy/long")
    assert has(check_study_counts({"x.jsonl": good_pair(max_tokens=300)}), "max_tokens 300")
    assert has(check_study_counts({"x.jsonl": good_pair(length="short")}), "tags.length")


def test_check_demo_and_smoke_fail(corpora):
    demo = corpora["demo.jsonl"]
    assert has(check_demo(demo[:4]), "2 pairs")
    assert has(check_demo(good_pair(max_tokens=80)), "only domains")
    too_long = [
        mk(p.id, p.lang, full_text(p), pair=p.pair, max_tokens=200, domain=str(tag(p, "domain")))
        for p in demo
    ]
    assert has(check_demo(too_long), "max_tokens 200")
    assert has(check_smoke(good_pair(max_tokens=32)[:1]), "languages")
    assert has(check_smoke(good_pair(max_tokens=64)), "max_tokens 64")


def test_manifest_check_fails_on_changed_corpus(tmp_path):
    mod = _load_manifest_script()
    copy = tmp_path / "corpora"
    shutil.copytree(CORPORA, copy)

    def check() -> int:
        return mod.main(["--check", "--corpora", str(copy)])

    assert check() == 0
    smoke = copy / "smoke.jsonl"
    smoke.write_text(smoke.read_text(encoding="utf-8").replace("1文", "2文"), encoding="utf-8")
    assert check() == 1  # a file changed
    assert mod.main(["--corpora", str(copy)]) == 0  # regenerate
    assert check() == 0
    (copy / "extra.jsonl").write_text(smoke.read_text(encoding="utf-8"), encoding="utf-8")
    assert check() == 1  # a file the manifest does not list
    (copy / "extra.jsonl").unlink()
    smoke.unlink()
    assert check() == 1  # the manifest lists a missing file
    (copy / "MANIFEST.json").unlink()
    assert check() == 1  # no manifest
