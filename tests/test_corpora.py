"""The parallel Japanese/English prompt corpora (tokenlens.corpora, docs/corpora.md).

The real corpora must follow every rule; every rule also gets a broken corpus and
must name the problem, so no check can pass vacuously.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tokenlens.cli import main
from tokenlens.corpora import (
    EXPECTED_FILES,
    QUICK,
    check_balance,
    check_corpora,
    check_demo,
    check_file_domains,
    check_files_present,
    check_languages,
    check_lines,
    check_pairing,
    check_smoke,
    check_study_counts,
    check_unique,
    corpora_dir,
    full_text,
    tag,
)
from tokenlens.corpus_manifest import MANIFEST, build_manifest, manifest_problems, render_manifest
from tokenlens.prompts import Prompt, read_prompts

CORPORA = corpora_dir()
FILES = sorted(CORPORA.glob("*.jsonl"))


# ----------------------------------------------------------------- the real corpora


@pytest.fixture(scope="module")
def corpora() -> dict[str, list[Prompt]]:
    return {f.name: read_prompts(f) for f in FILES}


def test_all_rules_hold_for_the_shipped_corpora() -> None:
    assert check_corpora() == []


def test_files_present() -> None:
    assert check_files_present({f.name for f in FILES}) == []
    assert check_files_present(set(EXPECTED_FILES) - {"news.jsonl"}) == ["news.jsonl: missing"]


@pytest.mark.parametrize("path", FILES, ids=[f.name for f in FILES])
def test_file_parses(path: Path) -> None:
    prompts = read_prompts(path)  # raises TokenlensError naming the bad line
    assert check_lines(path, prompts) == []


def test_check_lines_fails_on_blank_lines(tmp_path: Path) -> None:
    src = CORPORA / "smoke.jsonl"
    path = tmp_path / "smoke.jsonl"
    path.write_text(src.read_text(encoding="utf-8").replace("\n", "\n\n", 1), "utf-8")
    assert has(check_lines(path, read_prompts(path)), "blank lines")


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
    assert check_file_domains(corpora) == []
    mixed = {"policy.jsonl": corpora["policy.jsonl"] + corpora["news.jsonl"][:1]}
    assert has(check_file_domains(mixed), "policy.jsonl: domains ['news', 'policy']")
    assert check_file_domains({name: corpora[name] for name in QUICK}) == []


def test_demo(corpora):
    assert check_demo(corpora["demo.jsonl"]) == []


def test_smoke(corpora):
    assert check_smoke(corpora["smoke.jsonl"]) == []


def test_manifest_matches_files():
    stored_text = (CORPORA / MANIFEST).read_text(encoding="utf-8")
    assert stored_text == render_manifest(build_manifest(CORPORA)), "tokenlens corpora manifest"
    assert manifest_problems(CORPORA) == []


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


def test_manifest_check_fails_on_changed_corpus(tmp_path, capsys):
    copy = tmp_path / "corpora"
    shutil.copytree(CORPORA, copy)

    def check() -> int:
        return main(["corpora", "manifest", "--check", "--dir", str(copy)])

    assert check() == 0
    smoke = copy / "smoke.jsonl"
    smoke.write_text(smoke.read_text(encoding="utf-8").replace("1文", "2文"), encoding="utf-8")
    assert check() == 2  # a file changed
    assert "smoke.jsonl: sha256 is" in capsys.readouterr().out
    assert main(["corpora", "manifest", "--dir", str(copy)]) == 0  # regenerate
    assert check() == 0
    (copy / "extra.jsonl").write_text(smoke.read_text(encoding="utf-8"), encoding="utf-8")
    assert check() == 2  # a file the manifest does not list
    (copy / "extra.jsonl").unlink()
    smoke.unlink()
    assert check() == 2  # the manifest lists a missing file
    (copy / MANIFEST).unlink()
    assert check() == 2  # no manifest
    assert "MANIFEST.json: missing" in capsys.readouterr().out


def test_corpora_check_command(tmp_path, capsys):
    assert main(["corpora", "check"]) == 0
    assert "all rules hold" in capsys.readouterr().out
    copy = tmp_path / "corpora"
    shutil.copytree(CORPORA, copy)
    (copy / "demo.jsonl").unlink()
    assert main(["corpora", "check", "--dir", str(copy)]) == 2
    out, err = capsys.readouterr()
    assert "demo.jsonl: missing" in out
    assert err.count("\n") == 1 and "problems in" in err  # one line on stderr
