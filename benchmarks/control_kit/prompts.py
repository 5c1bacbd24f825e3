"""Training prompts for the control's drafters, and their overlap check against the
evaluation prompts.

Prompts are parallel Japanese/English chat requests: a task template x a topic x an
answer format (24 templates: the first 16 essay-like ones of the 2026-12-03 run, and 8
of the study's other kinds of task added after it), all written here (none taken from
the corpora), in one order fixed by a seed. A prompt is dropped, with its pair partner,
when its text equals an evaluation prompt's, when a Japanese text (one with kana or
kanji) shares any 12-character window with one (whitespace collapsed), or when any text
shares an 8-word sequence with one (lower-cased words): the evaluation prompts are every
``corpora/*.jsonl`` and the full study's ``reports/full/prompts.jsonl``.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

JAPANESE = re.compile(r"[\u3040-\u30ff\u3400-\u9fff]")  # kana or kanji
CHARS = 12  # a shared run of this many characters drops a prompt
WORDS = 8  # a shared run of this many words drops a prompt

SYSTEM = {
    "ja": "あなたは知識が豊富で誠実なアシスタントです。質問には日本語で答えます。",
    "en": "You are a knowledgeable and honest assistant who answers in English.",
}

# (Japanese, English) task templates; {topic} and {fmt} are filled below.
TEMPLATES: tuple[tuple[str, str], ...] = (
    ("{topic}の基本を、{fmt}教えてください。", "Teach me the basics of {topic}, {fmt}."),
    (
        "{topic}についてよくある誤解を挙げ、{fmt}正してください。",
        "Name common misconceptions about {topic} and correct them, {fmt}.",
    ),
    (
        "これから{topic}に触れる人への助言を、{fmt}書いてください。",
        "Write advice for someone who is new to {topic}, {fmt}.",
    ),
    (
        "{topic}の長所と短所を、{fmt}比べてください。",
        "Weigh the upsides and downsides of {topic}, {fmt}.",
    ),
    (
        "{topic}の歩んできた歴史を、{fmt}振り返ってください。",
        "Look back on how {topic} developed over time, {fmt}.",
    ),
    (
        "{topic}を題材に、子ども向けのクイズを答え付きで{fmt}作ってください。",
        "Make a quiz for children about {topic}, answers included, {fmt}.",
    ),
    (
        "{topic}が日々の生活に与える影響を、{fmt}述べてください。",
        "Describe the influence of {topic} on everyday life, {fmt}.",
    ),
    (
        "友人に{topic}の魅力を伝える手紙を、{fmt}書いてみてください。",
        "Write a letter telling a friend what is appealing about {topic}, {fmt}.",
    ),
    (
        "{topic}について専門家に尋ねたい質問と、その答えの例を{fmt}示してください。",
        "Give questions one might put to an expert on {topic}, with sample replies, {fmt}.",
    ),
    (
        "{topic}にこれから十年で起こりそうな変化を、{fmt}予想してください。",
        "Forecast how {topic} could change during the coming decade, {fmt}.",
    ),
    (
        "{topic}に取り組むときに避けたい失敗を、{fmt}紹介してください。",
        "Describe pitfalls worth avoiding when dealing with {topic}, {fmt}.",
    ),
    (
        "{topic}を題材にした短い物語を、{fmt}書いてください。",
        "Write a short story centred on {topic}, {fmt}.",
    ),
    (
        "{topic}をひとことで言い表すとしたら何と言いますか。理由も{fmt}添えてください。",
        "How would you sum up {topic} in one phrase? Give your reasons, {fmt}.",
    ),
    (
        "{topic}をめぐる賛成と反対の意見を、{fmt}整理してください。",
        "Lay out the case for and against {topic}, {fmt}.",
    ),
    (
        "{topic}に関係する言葉を五つ選び、それぞれの意味を{fmt}解説してください。",
        "Choose five words connected with {topic} and say what each means, {fmt}.",
    ),
    (
        "{topic}について、高校の授業の導入で話す内容を{fmt}考えてください。",
        "Prepare an opening for a high-school lesson on {topic}, {fmt}.",
    ),  # added after the 2026-12-03 run, whose essay-only prompts narrowed the drafters: the
    # study's other kinds of task (code, translation, chat, news, notices, email, steps)
    (
        "{topic}に関係する簡単なPythonプログラムを書き、その動きを{fmt}説明してください。",
        "Write a simple Python program related to {topic} and explain how it works, {fmt}.",
    ),
    (
        "{topic}の記録を管理する表をSQLで設計し、その考え方を{fmt}述べてください。",
        "Design an SQL table for keeping records about {topic} and give the reasoning, {fmt}.",
    ),
    (
        "「{topic}について学ぶのは楽しい」を英語に訳し、訳し方の工夫を{fmt}説明してください。",
        'Translate "learning about {topic} is fun" into Japanese and explain the choices, {fmt}.',
    ),
    (
        "週末に{topic}を試すつもりです。友達のような口調で、{fmt}背中を押してください。",
        "I plan to try {topic} this weekend. Cheer me on like a friend would, {fmt}.",
    ),
    (
        "{topic}を取り上げた地域ニュースの記事を、{fmt}書いてください。",
        "Write a local news report featuring {topic}, {fmt}.",
    ),
    (
        "{topic}について市役所が住民に出すお知らせの文を、{fmt}作ってください。",
        "Draft a notice from the city hall to residents about {topic}, {fmt}.",
    ),
    (
        "{topic}の講座を欠席することを講師に伝えるメールを、{fmt}書いてください。",
        "Write an email to an instructor saying you will miss a session on {topic}, {fmt}.",
    ),
    (
        "{topic}の準備から片付けまでの手順を、{fmt}まとめてください。",
        "Summarise the steps for {topic}, from getting ready to tidying up, {fmt}.",
    ),
)

# (Japanese, English) answer formats: an adverbial phrase in either language.
FORMATS: tuple[tuple[str, str], ...] = (
    ("三つの箇条書きで", "as three bullet points"),
    ("四文程度で", "in roughly four sentences"),
    ("二つの短い段落に分けて", "split into two short paragraphs"),
    ("専門用語を避けて手短に", "briefly and without jargon"),
)

# (Japanese, English) topics: noun phrases.
TOPICS: tuple[tuple[str, str], ...] = (
    ("家庭菜園", "growing vegetables at home"),
    ("天体観測", "stargazing"),
    ("発酵食品", "fermented foods"),
    ("睡眠の質", "the quality of sleep"),
    ("火山", "volcanoes"),
    ("鉄道", "railways"),
    ("渡り鳥", "migratory birds"),
    ("折り紙", "origami"),
    ("将棋", "shogi"),
    ("囲碁", "the game of go"),
    ("茶道", "the tea ceremony"),
    ("俳句", "haiku"),
    ("図書館", "public libraries"),
    ("博物館", "museums"),
    ("地震への備え", "earthquake preparedness"),
    ("台風", "typhoons"),
    ("海洋プラスチック", "plastic in the oceans"),
    ("太陽光発電", "solar power"),
    ("風力発電", "wind power"),
    ("電気自動車", "electric cars"),
    ("自転車通勤", "cycling to work"),
    ("マラソン", "marathon running"),
    ("水泳", "swimming"),
    ("登山", "mountain climbing"),
    ("キャンプ", "camping"),
    ("写真撮影", "photography"),
    ("水彩画", "watercolour painting"),
    ("ピアノの練習", "piano practice"),
    ("合唱", "choir singing"),
    ("映画の字幕", "film subtitles"),
    ("ボードゲーム", "board games"),
    ("パン作り", "baking bread"),
    ("味噌汁", "miso soup"),
    ("コーヒーの焙煎", "roasting coffee"),
    ("紅茶", "black tea"),
    ("和菓子", "Japanese confectionery"),
    ("ミツバチ", "honeybees"),
    ("森林", "forests"),
    ("サンゴ礁", "coral reefs"),
    ("恐竜", "dinosaurs"),
    ("化石", "fossils"),
    ("月面探査", "exploring the Moon"),
    ("人工衛星", "artificial satellites"),
    ("天気予報", "weather forecasting"),
    ("虹", "rainbows"),
    ("地図の読み方", "reading maps"),
    ("方言", "regional dialects"),
    ("外国語の学習", "learning a foreign language"),
    ("手書きの手紙", "handwritten letters"),
    ("日記をつける習慣", "keeping a diary"),
    ("節約", "saving money"),
    ("家計簿", "household budgeting"),
    ("リサイクル", "recycling"),
    ("古着", "second-hand clothing"),
    ("ペットの犬", "pet dogs"),
    ("猫との暮らし", "living with cats"),
    ("金魚", "goldfish"),
    ("動物園", "zoos"),
    ("水族館", "aquariums"),
    ("祭り", "local festivals"),
    ("花火", "fireworks"),
    ("温泉", "hot springs"),
    ("城", "castles"),
    ("橋の構造", "how bridges are built"),
    ("灯台", "lighthouses"),
    ("時計の仕組み", "how clocks work"),
    ("数独", "sudoku"),
    ("素数", "prime numbers"),
    ("統計の考え方", "statistical thinking"),
    ("暗号の歴史", "the history of ciphers"),
)


# The study's prompts are mostly raw text, encoded as is with no chat template
# (reports/full/prompts.jsonl: 108 of 120; only 12 are chat messages). The 2026-12-03
# run trained on chat-templated answers only, a context the traces rarely saw; the
# prompts are now rendered in the study's proportion, the same way for both languages of
# a pair, by a seeded draw.
RAW_SHARE = 108 / 120


def _rendered(pid: str, lang: str, pair: str, system: str, text: str, raw: bool) -> dict[str, Any]:
    """A prompt as the project's prompt files hold it: raw ``text`` or chat ``messages``."""
    if raw:
        return {"id": pid, "lang": lang, "pair": pair, "text": text}
    messages = [{"role": "system", "content": system}, {"role": "user", "content": text}]
    return {"id": pid, "lang": lang, "pair": pair, "messages": messages}


def build(seed: int = 0, raw_share: float = RAW_SHARE) -> list[dict[str, Any]]:
    """Every training prompt, both languages, in one seeded order (pairs adjacent).

    Each prompt: ``id``, ``lang``, ``pair`` and either ``text`` (raw, for a seeded
    ``raw_share`` of the pairs) or ``messages`` (system, user), as in the project's
    prompt files.
    """
    combos = [
        (t, p, f)
        for t in range(len(TEMPLATES))
        for p in range(len(TOPICS))
        for f in range(len(FORMATS))
    ]
    rng = random.Random(seed)
    rng.shuffle(combos)
    prompts = []
    for t, p, f in combos:
        pair = f"t{t:02d}-p{p:03d}-f{f}"
        raw = rng.random() < raw_share
        for li, lang in enumerate(("ja", "en")):
            text = TEMPLATES[t][li].format(topic=TOPICS[p][li], fmt=FORMATS[f][li])
            prompts.append(_rendered(f"{pair}-{lang}", lang, pair, SYSTEM[lang], text, raw))
    return prompts


def prompt_texts(prompt: dict[str, Any]) -> list[str]:
    """The texts of a prompt (its ``text`` or each message's content)."""
    if "text" in prompt:
        return [str(prompt["text"])]
    return [str(m.get("content", "")) for m in prompt.get("messages", [])]


def _chars(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def _words(text: str) -> list[str]:
    return re.findall(r"[^\W_]+(?:'[^\W_]+)?", text.lower())


def char_grams(text: str, n: int = CHARS) -> set[str]:
    s = _chars(text)
    return {s[i : i + n] for i in range(len(s) - n + 1)}


def word_grams(text: str, n: int = WORDS) -> set[tuple[str, ...]]:
    w = _words(text)
    return {tuple(w[i : i + n]) for i in range(len(w) - n + 1)}


def eval_files(root: Path) -> list[Path]:
    """The evaluation prompt files a training prompt must not overlap."""
    return [
        *sorted((root / "corpora").glob("*.jsonl")),
        root / "reports" / "full" / "prompts.jsonl",
    ]


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def drop_overlaps(
    prompts: list[dict[str, Any]], eval_prompts: Iterable[dict[str, Any]]
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(the prompts that share no text with ``eval_prompts``, the check's counts).

    A prompt that overlaps is dropped with every prompt of its pair. The counts say how
    many prompts overlapped by each rule (a prompt counts under the first rule it
    breaks: exact, then characters, then words).
    """
    exact: set[str] = set()
    chars: set[str] = set()
    words: set[tuple[str, ...]] = set()
    n_eval = 0
    for e in eval_prompts:
        n_eval += 1
        for text in prompt_texts(e):
            exact.add(_chars(text))
            chars |= char_grams(text)
            words |= word_grams(text)
    reasons: dict[str, str] = {}
    for p in prompts:
        for text in prompt_texts(p):
            if _chars(text) in exact:
                reason = "exact"
            elif JAPANESE.search(text) and char_grams(text) & chars:
                reason = f"{CHARS}_chars"
            elif word_grams(text) & words:
                reason = f"{WORDS}_words"
            else:
                continue
            reasons.setdefault(p["id"], reason)
    bad_pairs = {p["pair"] for p in prompts if p["id"] in reasons}
    kept = [p for p in prompts if p["pair"] not in bad_pairs]
    by_reason: dict[str, int] = {}
    for r in reasons.values():
        by_reason[r] = by_reason.get(r, 0) + 1
    report = {
        "rule": f"drop a pair if any of its prompts' texts equals an evaluation prompt's, "
        f"shares a {CHARS}-character window with one (texts with kana or kanji; "
        f"whitespace collapsed), or a {WORDS}-word sequence (any text; lower-cased words)",
        "evaluation_prompts": n_eval,
        "built": len(prompts),
        "overlapping": len(reasons),
        "overlapping_by_rule": by_reason,
        "overlapping_ids": sorted(reasons)[:50],
        "dropped_pairs": len(bad_pairs),
        "kept": len(kept),
    }
    return kept, report


def prepare(root: Path, seed: int = 0) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Build the training prompts and check them against the evaluation prompt files
    under ``root`` (a checkout): (kept prompts, the check's record with file hashes)."""
    files = eval_files(root)
    evals = [p for f in files for p in read_jsonl(f)]
    kept, report = drop_overlaps(build(seed), evals)
    report["seed"] = seed
    report["evaluation_files"] = {
        str(f.relative_to(root)): hashlib.sha256(f.read_bytes()).hexdigest() for f in files
    }
    report["prompts_sha256"] = hashlib.sha256(
        json.dumps(kept, ensure_ascii=False, sort_keys=True).encode()
    ).hexdigest()
    return kept, report


# Held-out prompts for the manipulation check (agreement.py): their own system prompts,
# task templates (code, steps, chat, translation, news, explanation: the study's kinds)
# and topics, sharing nothing with the training prompts or the evaluation prompts
# (``prepare_heldout`` checks both with the rule above).
HELDOUT_SYSTEM = {
    "ja": "あなたは落ち着いた口調で要点をまとめるアシスタントです。",
    "en": "You are a calm assistant who gets straight to the point.",
}
HELDOUT_TEMPLATES: tuple[tuple[str, str], ...] = (
    (
        "{topic}を扱う小さなPythonの関数を書き、コードの後に使い方を一行で説明してください。",
        "Write a small Python function that deals with {topic}, then explain its use in "
        "one line after the code.",
    ),
    (
        "{topic}を始めるための手順を、番号付きで五つ挙げてください。",
        "List five numbered steps for getting started with {topic}.",
    ),
    (
        "最近{topic}に興味があります。気軽な雑談のつもりで、感想と質問を返してください。",
        "Lately I have grown curious about {topic}. Reply casually, with a thought and a "
        "question back.",
    ),
    (
        "次の文を英語に訳してください：「{topic}は思ったより奥が深い。」",
        'Translate into Japanese: "{topic} turns out to be deeper than it first seems."',
    ),
    (
        "{topic}に関する架空のニュース記事の見出しと、三行の要約を書いてください。",
        "Write a headline and a three-line summary for an invented news story about {topic}.",
    ),
    (
        "{topic}を小学生にもわかるように説明してください。",
        "Explain {topic} so that a primary-school pupil could follow.",
    ),
)
HELDOUT_TOPICS: tuple[tuple[str, str], ...] = (
    ("カレンダーの日付計算", "calendar date arithmetic"),
    ("CSVファイル", "CSV files"),
    ("パスワード管理", "password management"),
    ("植物の光合成", "photosynthesis"),
    ("貯水池", "water reservoirs"),
    ("郵便制度", "the postal system"),
    ("ロボット掃除機", "robot vacuum cleaners"),
    ("気温の単位換算", "temperature unit conversion"),
    ("古代エジプト", "ancient Egypt"),
    ("短距離走", "sprinting"),
    ("ジャズ", "jazz"),
    ("オンライン会議", "online meetings"),
)


def build_heldout(seed: int = 1, raw_share: float = RAW_SHARE) -> list[dict[str, Any]]:
    """The held-out prompts, both languages, pairs adjacent, ids ``h…``; raw text for a
    seeded ``raw_share`` of the pairs, chat messages for the rest."""
    rng = random.Random(seed)
    prompts = []
    for t, tmpl in enumerate(HELDOUT_TEMPLATES):
        for p, topic in enumerate(HELDOUT_TOPICS):
            pair = f"h{t:02d}-p{p:03d}"
            raw = rng.random() < raw_share
            for li, lang in enumerate(("ja", "en")):
                text = tmpl[li].format(topic=topic[li])
                prompts.append(
                    _rendered(f"{pair}-{lang}", lang, pair, HELDOUT_SYSTEM[lang], text, raw)
                )
    return prompts


def render(tokenizer: Any, prompt: dict[str, Any]) -> list[int]:
    """The token ids the traced engine receives for ``prompt``: chat messages through the
    tokenizer's chat template (with the generation prompt), raw text as is; no special
    tokens added (tokenlens.engine.worker.render_prompt's rule)."""
    if "messages" in prompt:
        text = tokenizer.apply_chat_template(
            prompt["messages"], tokenize=False, add_generation_prompt=True
        )
    else:
        text = prompt["text"]
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def prepare_heldout(
    root: Path, training: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The held-out prompts that share nothing with ``training`` or the evaluation
    prompt files under ``root``, and the check's record."""
    evals = [p for f in eval_files(root) for p in read_jsonl(f)]
    kept, report = drop_overlaps(build_heldout(), [*evals, *training])
    report["against"] = "evaluation prompt files and the training prompts"
    return kept, report
