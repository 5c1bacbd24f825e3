"""Signatures: canonical order, round trip, and separators escaped."""

from tokenlens.signature import make_signature, parse_signature, sampling_label


def test_canonical_order_and_round_trip() -> None:
    a = make_signature({"seed": 0, "model": "m", "tokenlens": "0.1", "zeta": "z", "k": 3})
    b = make_signature({"k": 3, "zeta": "z", "tokenlens": "0.1", "model": "m", "seed": 0})
    assert a == b == "tokenlens:0.1|model:m|k:3|seed:0|zeta:z"
    assert parse_signature(a) == {
        "tokenlens": "0.1",
        "model": "m",
        "k": "3",
        "seed": "0",
        "zeta": "z",
    }


def test_values_cannot_break_the_format() -> None:
    sig = make_signature({"model": "a|b c", "draft": None})
    assert parse_signature(sig) == {"model": "a/b_c", "draft": "none"}


def test_sampling_label() -> None:
    assert sampling_label(0.0, 1.0, 0, 64) == "greedy,max64"
    assert sampling_label(0.7, 0.9, 20, 256) == "t0.7,p0.9,k20,max256"
