"""Label columns read fast and exactly: :mod:`tokenlens.analysis.columns`.

Every reader must give what ``astype(str)`` gives, on categorical and object columns,
with missing values of both kinds, inside :func:`remembered` (where a non-categorical
column is converted once) and outside it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tokenlens.analysis import columns
from tokenlens.analysis.columns import label_codes, labels, remembered

VALUES = ["ja", None, "en", np.nan, "ja", "<NA>", "other", "en"]


def frames() -> list[pd.DataFrame]:
    plain = pd.DataFrame({"c": pd.Series(VALUES, dtype=object)})
    return [plain, plain.assign(c=plain["c"].astype("category"))]


@pytest.mark.parametrize("inside", [False, True], ids=["outside", "remembered"])
@pytest.mark.parametrize("kind", [0, 1], ids=["object", "categorical"])
def test_readers_equal_astype_str(inside: bool, kind: int) -> None:
    frame = frames()[kind]
    expected = frame["c"].astype(str).to_numpy()
    wanted = ["ja", "en", "None", "nan"]
    with remembered() if inside else _nothing():
        for _ in range(2):  # the second read comes from what the first remembered
            assert list(labels(frame, "c")) == list(expected)
            codes = label_codes(frame, "c", wanted)
            assert list(codes) == [wanted.index(x) if x in wanted else -1 for x in expected]


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def test_a_column_is_converted_once_inside_and_forgotten_after(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    frame = frames()[0]
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
