"""Label columns read fast and exactly: :mod:`tokenlens.analysis.columns`.

Every reader must give what ``astype(str)`` gives, on categorical and object columns,
with missing values of both kinds, inside :func:`remembered` (where a non-categorical
column is converted once) and outside it.
"""

from __future__ import annotations

import contextlib

import numpy as np
import pandas as pd
import pytest

from tokenlens.analysis import columns
from tokenlens.analysis.columns import label_codes, labels, remembered

VALUES = ["ja", None, "en", np.nan, "ja", "<NA>", "other", "en"]


def frames() -> list[pd.DataFrame]:
    plain = pd.DataFrame({"c": pd.Series(VALUES, dtype=object)})
    arrow = pd.Series([None if pd.isna(v) else v for v in VALUES], dtype="string[pyarrow]")
    return [plain, plain.assign(c=plain["c"].astype("category")), plain.assign(c=arrow)]


@pytest.mark.parametrize("inside", [False, True], ids=["outside", "remembered"])
@pytest.mark.parametrize("kind", [0, 1, 2], ids=["object", "categorical", "arrow-strings"])
def test_readers_equal_astype_str(inside: bool, kind: int) -> None:
    frame = frames()[kind]
    expected = frame["c"].astype(str).to_numpy()
    wanted = ["ja", "en", "None", "nan"]
    with remembered() if inside else contextlib.nullcontext():
        for _ in range(2):  # the second read comes from what the first remembered
            assert list(labels(frame, "c")) == list(expected)
            codes = label_codes(frame, "c", wanted)
            assert list(codes) == [wanted.index(x) if x in wanted else -1 for x in expected]


@pytest.mark.parametrize("kind", [0, 2], ids=["object", "arrow-strings"])
def test_a_column_is_converted_once_inside_and_forgotten_after(
    kind: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    frame = frames()[kind]
    calls = []
    original = pd.Series.astype

    def counting(self: pd.Series, *args: object, **kwargs: object) -> pd.Series:
        calls.append(1)
        return original(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(pd.Series, "astype", counting)
    with remembered():
        for _ in range(5):
            labels(frame, "c")
            label_codes(frame, "c", ["ja"])
        assert len(calls) == 1
        # a column replaced under the same name is read afresh, not from the old one
        frame["c"] = pd.Series(["en"] * len(VALUES), dtype=object)
        assert set(labels(frame, "c")) == {"en"}
    assert columns._MEMO is None
    labels(frame, "c")
    assert len(calls) == 3


def test_group_codes_are_the_same_inside_and_kept_small() -> None:
    from tokenlens.analysis.breakdown import group_codes

    frame = frames()[0]
    outside = group_codes(frame, "c")
    with remembered():
        first, again = group_codes(frame, "c"), group_codes(frame, "c")
        kept = next(iter(columns._MEMO.values()))[1][0]  # type: ignore[union-attr]
    for codes, groups in (first, again):
        assert codes.dtype == np.int64 and list(codes) == list(outside[0])
        assert groups == outside[1]
    assert kept.dtype == np.int8 and not kept.flags.writeable
    assert columns.small_codes([-1, 300], 301).dtype == np.int16


@pytest.mark.parametrize("kind", [0, 2], ids=["object", "arrow-strings"])
def test_a_column_converted_in_blocks_is_factorised_as_a_whole(
    kind: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Blocks of 3 rows (labels first seen in a later block, and seen again across
    block boundaries) give the labels and codes of one factorisation of the column."""
    frame = frames()[kind]
    frame = pd.concat([frame, frame.iloc[::-1]], ignore_index=True)  # 16 rows
    monkeypatch.setattr(columns, "LABEL_BLOCK", 3)
    codes, names = pd.factorize(frame["c"].astype(str).to_numpy())
    with remembered():
        known = columns._factorised(frame["c"])
        assert known is not None
        distinct, rows = known
        assert list(distinct) == list(names)
        assert list(rows) == list(codes)
        assert list(labels(frame, "c")) == list(frame["c"].astype(str))
