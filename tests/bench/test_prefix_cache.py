"""Whether a bench case's measured repeats hit vLLM's prefix cache (no engine)."""

from __future__ import annotations

from tokenlens.bench.rows import Repeat, prefix_cache_note
from tokenlens.engine.results import SpecCounters


def _repeat(info: dict[str, int] | None) -> Repeat:
    return Repeat.of([], 1.0, SpecCounters(), info)


def test_repeats_that_found_cached_prompt_tokens_hit_the_cache() -> None:
    repeats = [
        _repeat({"prefix_cache_queries": 40, "prefix_cache_hits": 0, "num_preemptions": 0}),
        _repeat({"prefix_cache_queries": 40, "prefix_cache_hits": 32}),
    ]
    assert repeats[1].prefix_cache == {"queries": 40, "hits": 32}
    assert prefix_cache_note(repeats) == {"hit": True, "queried_tokens": 80, "hit_tokens": 32}


def test_no_hits_with_the_cache_off() -> None:
    repeats = [_repeat({"prefix_cache_queries": 0, "prefix_cache_hits": 0})] * 2
    assert prefix_cache_note(repeats) == {"hit": False, "queried_tokens": 0, "hit_tokens": 0}


def test_a_backend_without_the_counters_says_so() -> None:
    note = prefix_cache_note([_repeat(None), _repeat({"prefix_cache_queries": 1})])
    assert note["hit"] is None and "does not report" in note["why"]
