"""Fuzz every input format through the real CLI: success, or one line and a non-zero exit.

Hypothesis writes prompt files (odd ids, tags, text with lone surrogates, raw bytes,
BOMs, duplicate keys), bench plans (a valid plan with keys removed, retyped and added)
and damaged run directories (a real traced run with files deleted or garbled, manifest
and metrics values replaced, parquet columns dropped, nulled, retyped or perturbed,
rows duplicated or removed). Each goes through ``tokenlens.cli.main`` in-process, the
way a user runs it; a traceback escapes as an exception and fails the test.

Examples are derandomized (the same ones in every CI run, ~1 minute in all);
``TOKENLENS_FUZZ_EXAMPLES=500`` explores new ones locally.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import tempfile
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from tests.support import REAL_RUN, REPO, assert_one_line_error, cli

EXPLORE = os.environ.get("TOKENLENS_FUZZ_EXAMPLES")


def fuzz(examples: int) -> Callable[[Any], Any]:
    return settings(
        max_examples=int(EXPLORE) if EXPLORE else examples,
        derandomize=EXPLORE is None,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


def check(argv: list[str]) -> None:
    status, _, err = cli(argv)
    event(
        "success" if status == 0 else "refused: " + re.sub(r"\S*/\S*|\d+|'[^']*'", "_", err)[17:60]
    )
    if status != 0:
        assert_one_line_error(status, err)


@pytest.fixture(scope="module")
def scratch() -> Any:
    root = Path(tempfile.mkdtemp(prefix="tokenlens-fuzz-"))
    yield root
    shutil.rmtree(root, ignore_errors=True)


def fresh(root: Path, name: str) -> Path:
    return Path(tempfile.mkdtemp(prefix=f"{name}-", dir=root))


# -- prompt files ----------------------------------------------------------------------------

ODD_TEXT = ["", "  ", "\n", "\ud800", "a\udfffb", "日本語の文", "<|im_end|>", "\x00", "\u2028", "#"]
texts = st.one_of(st.text(max_size=24), st.sampled_from(ODD_TEXT))
json_scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(), texts)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)
valid_fields = {
    "id": st.text(
        st.characters(exclude_characters="#", exclude_categories=("Cc", "Cs")),
        min_size=1,
        max_size=8,
    ),
    "lang": st.sampled_from(["ja", "en", "JA", "ja-JP", "en-US", "zh-Hant", "ko"]),
    "text": st.text(min_size=1, max_size=30).filter(str.strip),
    "pair": st.text(max_size=4),
    "max_tokens": st.integers(1, 64),
    "tags": json_values,
}
odd_fields = {
    "id": st.one_of(st.sampled_from(["", " ", "a#1", "x\ty"]), texts, json_values),
    "lang": st.one_of(st.sampled_from(["en_US", "zz", "japanese", "ja-", "ja-JP-x-"]), json_values),
    "text": st.one_of(texts, json_values),
    "messages": st.one_of(
        st.lists(
            st.fixed_dictionaries(
                {},
                optional={
                    "role": st.one_of(st.sampled_from(["user", "", "bot"]), json_values),
                    "content": st.one_of(texts, json_values),
                },
            ),
            max_size=3,
        ),
        json_values,
    ),
    "pair": json_values,
    "max_tokens": st.one_of(st.integers(-3, 2**40), json_values),
    "colour": json_values,
}


@st.composite
def prompt_objects(draw: st.DrawFn) -> Any:
    """A valid prompt with up to two fields made odd (replaced, added or removed)."""
    obj = {
        key: draw(valid)
        for key, valid in valid_fields.items()
        if draw(st.booleans()) or key in ("id", "lang", "text")
    }
    for _ in range(draw(st.integers(0, 2))):
        key = draw(st.sampled_from(sorted(odd_fields)))
        if draw(st.integers(0, 4)) == 0:
            obj.pop(key, None)
        else:
            obj[key] = draw(odd_fields[key])
    return obj


@st.composite
def prompt_files(draw: st.DrawFn) -> bytes:
    lines = []
    for obj in draw(
        st.lists(st.one_of(*[prompt_objects()] * 3, json_values), min_size=0, max_size=5)
    ):
        text = json.dumps(obj, ensure_ascii=draw(st.booleans()))
        lines.append(text.encode("utf-8", "surrogatepass"))  # raw surrogates: invalid UTF-8
    lines += draw(st.lists(st.binary(max_size=16), max_size=1))
    if draw(st.booleans()):  # a known-good prompt, so that some files pass every check
        lines.insert(0, json.dumps({"id": "ok", "lang": "ja", "text": "こんにちは"}).encode())
    data = draw(st.sampled_from([b"\n", b"\r\n"])).join(lines)
    return (b"\xef\xbb\xbf" if draw(st.booleans()) else b"") + data


@fuzz(60)
@given(data=prompt_files(), command=st.sampled_from(["tokens", "trace"]), lang=st.booleans())
def test_prompt_files(scratch: Path, data: bytes, command: str, lang: bool) -> None:
    where = fresh(scratch, "prompts")
    path = where / "p.jsonl"
    path.write_bytes(data)
    if command == "tokens":
        check(["tokens", "--corpus", str(path), "--out", str(where / "out"), "--quiet"])
    else:
        # A weightless model without --load-format dummy is refused after every prompt
        # check and before any engine: the whole validation runs, vLLM never starts.
        argv = ["trace", "--prompts", str(path), "--out", str(where / "run"), "--quiet"]
        argv += ["--model", "tiny-mimo-mtp"] + (["--lang", "JA"] if lang else [])
        check(argv)
        assert not (where / "run" / "engine.log").exists()


# -- bench plans -----------------------------------------------------------------------------

PLAN = tomllib.loads((REPO / "plans" / "demo-cpu-small.toml").read_text())
PLAN["corpus"][0]["path"] = str(REPO / "corpora" / "demo.jsonl")


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value) if value == value and abs(value) != float("inf") else "nan"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {toml_value(v)}" for k, v in value.items()) + "}"
    return '"?"'


def toml_text(plan: dict[str, Any]) -> str:
    out = []
    for key, value in plan.items():
        if not isinstance(value, dict | list) or (isinstance(value, list) and not value):
            out.append(f"{json.dumps(key)} = {toml_value(value)}")
    for key, value in plan.items():
        if isinstance(value, dict):
            out.append(f"[{json.dumps(key)}]")
            out += [f"{json.dumps(k)} = {toml_value(v)}" for k, v in value.items()]
        elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            for item in value:
                out.append(f"[[{json.dumps(key)}]]")
                out += [f"{json.dumps(k)} = {toml_value(v)}" for k, v in item.items()]
    return "\n".join(out) + "\n"


toml_scalars = st.one_of(
    st.booleans(), st.integers(-5, 2**40), st.floats(allow_nan=False), st.text(max_size=12)
)
toml_values = st.one_of(
    toml_scalars,
    st.lists(toml_scalars, max_size=3),
    st.dictionaries(st.text(max_size=6), toml_scalars, max_size=2),
)
sections = st.sampled_from(["bench", "sampling", "model", "method", "corpus"])
edits = st.one_of(
    st.tuples(st.just("delete"), sections, st.text(max_size=12)),
    st.tuples(st.just("set"), sections, st.text(max_size=12), toml_values),
    st.tuples(st.just("drop_section"), sections),
)
KNOWN_KEYS = {
    "bench": ["name", "warmup", "repeats", "concurrency", "chat", "warmup_tokens"],
    "sampling": ["temperature", "top_p", "top_k", "seed", "max_tokens", "ignore_eos"],
    "model": ["name", "path", "dtype", "quantization", "max_model_len", "engine", "load_format"],
    "method": ["name", "method", "k", "draft_model", "options"],
    "corpus": ["name", "path", "langs", "lengths", "limit"],
}


@fuzz(40)
@given(edit_list=st.lists(edits, min_size=1, max_size=3), pick=st.randoms(use_true_random=False))
def test_plans(scratch: Path, edit_list: list[tuple[Any, ...]], pick: random.Random) -> None:
    plan = json.loads(json.dumps(PLAN))
    for edit in edit_list:
        kind, section = edit[0], edit[1]
        if kind == "drop_section":
            plan.pop(section, None)
            continue
        table = plan.setdefault(section, {} if section in ("bench", "sampling") else [{}])
        if isinstance(table, list):
            table = table[pick.randrange(len(table))] if table else {}
        key = edit[2] if pick.random() < 0.3 else pick.choice(KNOWN_KEYS[section])
        if kind == "delete":
            table.pop(key, None)
        else:
            table[key] = edit[3]
    path = fresh(scratch, "plan") / "plan.toml"
    path.write_text(toml_text(plan), encoding="utf-8", errors="surrogatepass")
    check(["bench", "--plan", str(path), "--check"])


# -- damaged run directories -----------------------------------------------------------------

FILES = ["manifest.json", "metrics.json", "requests.parquet", "events.parquet"]
TABLES = {
    "requests.parquet": pq.read_schema(REAL_RUN / "requests.parquet").names,
    "events.parquet": pq.read_schema(REAL_RUN / "events.parquet").names,
}
# The keys analyze reads first (drawn as often as all the others together).
READ_KEYS = ["status", "tokenizer", "speculative", "signature", "reconciliation", "resumed"]
READ_KEYS += ["salvage", "salvaged_at"]
MANIFEST_KEYS = st.sampled_from(READ_KEYS) | st.sampled_from(
    sorted(json.loads((REAL_RUN / "manifest.json").read_text()))
)
table_names = st.sampled_from(sorted(TABLES))
damages = st.one_of(
    st.tuples(st.just("delete"), st.sampled_from(FILES)),
    st.tuples(st.just("garbage"), st.sampled_from(FILES), st.binary(max_size=48)),
    st.tuples(st.just("truncate"), st.sampled_from(FILES), st.floats(0, 1)),
    st.tuples(st.just("manifest"), MANIFEST_KEYS, json_values),
    st.tuples(
        st.just("manifest"),
        st.just("speculative"),
        st.dictionaries(
            st.sampled_from(["method", "num_speculative_tokens", "model"]), json_values
        ),
    ),
    st.tuples(st.just("manifest_drop"), MANIFEST_KEYS),
    st.tuples(
        st.just("metrics"),
        st.sampled_from(["num_drafts", "num_draft_tokens", "num_accepted_tokens"])
        | st.just("accepted_per_position"),
        json_values,
    ),
    st.tuples(st.just("drop_column"), table_names, st.integers(0, 99)),
    st.tuples(st.just("null_column"), table_names, st.integers(0, 99), st.floats(0, 1)),
    st.tuples(st.just("string_column"), table_names, st.integers(0, 99)),
    st.tuples(st.just("perturb"), table_names, st.integers(0, 99), st.integers(-3, 3)),
    st.tuples(st.just("rows"), table_names, st.sampled_from(["dup", "drop", "empty", "reverse"])),
)


def perturb(column: pa.ChunkedArray, delta: int, rng: random.Random) -> pa.Array:
    values = column.to_pylist()
    if not values:
        return pa.array(values, column.type)
    i = rng.randrange(len(values))
    v = values[i]
    if isinstance(v, bool):
        values[i] = not v
    elif isinstance(v, int):
        values[i] = v + delta
    elif isinstance(v, float):
        values[i] = v * delta
    elif isinstance(v, str):
        values[i] = v[::-1] + "x" * abs(delta)
    elif isinstance(v, list):
        values[i] = v[: max(0, len(v) + delta)]
    return pa.array(values, column.type)


def damage(run: Path, item: tuple[Any, ...], rng: random.Random) -> None:
    kind, target = item[0], item[1]
    if kind in ("delete", "garbage", "truncate"):
        path = run / target
        if not path.exists():
            return
        if kind == "delete":
            path.unlink()
        elif kind == "garbage":
            path.write_bytes(item[2])
        else:
            data = path.read_bytes()
            path.write_bytes(data[: int(len(data) * item[2])])
        return
    if kind in ("manifest", "manifest_drop", "metrics"):
        name = "metrics.json" if kind == "metrics" else "manifest.json"
        try:
            data = json.loads((run / name).read_text())
        except (OSError, ValueError):
            return
        if not isinstance(data, dict):
            return
        if kind == "manifest_drop":
            data.pop(target, None)
        else:
            data[target] = item[2]
        (run / name).write_text(json.dumps(data), errors="surrogatepass")
        return
    try:
        table = pq.read_table(run / target)
    except (OSError, pa.ArrowException):
        return
    names = table.schema.names
    if kind == "rows":
        how = item[2]
        if how == "dup" and table.num_rows:
            table = pa.concat_tables([table, table.slice(0, 1)])
        elif how == "drop" and table.num_rows:
            table = table.slice(1)
        elif how == "empty":
            table = table.slice(0, 0)
        else:
            table = table.take(pa.array(list(range(table.num_rows))[::-1], pa.int64()))
    else:
        name = names[item[2] % len(names)]
        i = names.index(name)
        if kind == "drop_column":
            table = table.drop_columns([name])
        elif kind == "null_column":
            n = table.num_rows
            mask = pa.array([rng.random() < item[3] for _ in range(n)], pa.bool_())
            nulls = pa.nulls(n, table.schema.field(name).type)
            table = table.set_column(i, name, pc.if_else(mask, nulls, table.column(name)))
        elif kind == "string_column":
            text = [None if v is None else str(v) for v in table.column(name).to_pylist()]
            table = table.set_column(i, name, pa.array(text, pa.string()))
        else:
            table = table.set_column(i, name, perturb(table.column(name), item[3], rng))
    pq.write_table(table, run / target)


@fuzz(80)
@given(
    items=st.lists(damages, min_size=1, max_size=3),
    flags=st.lists(
        st.sampled_from(["--allow-partial", "--allow-unreconciled", "--overwrite"]),
        unique=True,
    ),
    tokenizer=st.sampled_from([None, "qwen2.5", "qwen3.5", "no-such-tokenizer"]),
    pick=st.randoms(use_true_random=False),
)
def test_damaged_run_directories(
    scratch: Path,
    items: list[tuple[Any, ...]],
    flags: list[str],
    tokenizer: str | None,
    pick: random.Random,
) -> None:
    where = fresh(scratch, "run")
    run = where / "run"
    shutil.copytree(REAL_RUN, run, ignore=shutil.ignore_patterns("capture"))
    for item in items:
        damage(run, item, pick)
    argv = ["analyze", str(run), "--out", str(where / "out"), "--quiet", *flags]
    argv += ["--bootstrap", "10", "--no-regression"]
    check(argv + (["--tokenizer", tokenizer] if tokenizer else []))
