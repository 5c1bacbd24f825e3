"""Shared fixtures for the text-layer tests."""

from __future__ import annotations

import pytest

from tokenlens.text.tokenizers import Vocabulary, load_tokenizer


@pytest.fixture(scope="session", params=["qwen3.5", "qwen2.5"])
def vocab(request: pytest.FixtureRequest) -> Vocabulary:
    """The real offline Qwen vocabularies."""
    return load_tokenizer(str(request.param))
