"""Fast, exact stand-ins for ``frame[column].astype(str).to_numpy()`` on a joined frame.

The figures read the same few label columns (``lang``, ``run``, ``method``, a class
column) dozens of times per analysis; ``astype(str)`` builds a fresh string per row
each time, which at millions of rows was a fifth of ``analyze``. On a categorical
column :func:`labels` converts each *category* once and takes by code, with the very
strings ``astype(str)`` gives (``"nan"`` for a missing value); any other dtype falls
back to ``astype(str)`` itself, so callers see equal arrays whatever the dtype.
Inside :func:`remembered` (the figures of one analysis), a non-categorical column is
converted once and factorised; later calls take from that (the same strings).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt
import pandas as pd

from tokenlens.arrays import I64

Strings = npt.NDArray[np.object_]
T = TypeVar("T")

# A column's storage -> what was computed from it, with the storage itself (held, so
# that its memory or identity is not reused while remembered). The key of a numpy
# column is (data address, length, stride, what); of an extension array (pandas'
# Arrow-backed strings), (id of the array, -1, -1, what). Active only in remembered().
_MEMO: dict[tuple[int, int, int, str], tuple[object, Any]] | None = None


@contextlib.contextmanager
def remembered() -> Iterator[None]:
    """Convert each non-categorical column once while inside (one analysis' figures,
    which never change a column in place), then forget every conversion."""
    global _MEMO
    outer = _MEMO
    _MEMO = {} if outer is None else outer
    try:
        yield
    finally:
        _MEMO = outer


def once(series: pd.Series, what: str, compute: Callable[[pd.Series], T]) -> T:
    """``compute(series)``, computed once per column and ``what`` inside
    :func:`remembered` (every time outside it)."""
    if _MEMO is None:
        return compute(series)
    storage = series.array
    if isinstance(storage, pd.arrays.NumpyExtensionArray):
        values = storage.to_numpy()  # the column's own array (a new wrapper each time)
        if values.ndim != 1:
            return compute(series)
        held: object = values
        key = (values.__array_interface__["data"][0], len(values), values.strides[0], what)
    else:  # the column's own extension array, the same object each time
        held, key = storage, (id(storage), -1, -1, what)
    if key not in _MEMO:
        _MEMO[key] = (held, compute(series))
    result: T = _MEMO[key][1]
    return result


def small_codes(codes: npt.ArrayLike, n: int) -> npt.NDArray[np.signedinteger[Any]]:
    """``codes`` (-1 .. n-1) in the narrowest signed integer type, read-only: what
    :func:`once` keeps for a whole analysis costs a byte per row, not eight."""
    kind = np.int8 if n < 2**7 else np.int16 if n < 2**15 else np.int32 if n < 2**31 else np.int64
    out: npt.NDArray[np.signedinteger[Any]] = np.asarray(codes).astype(kind)
    out.flags.writeable = False  # shared by every caller inside remembered()
    return out


LABEL_BLOCK = 1 << 20
"""Rows converted to strings at a time by :func:`_factorise_labels`: a Python string
per row of a whole column (about 600 MiB at ten million rows) is never held at once."""


def _factorise_labels(
    series: pd.Series,
) -> tuple[Strings, npt.NDArray[np.signedinteger[Any]]]:
    """The distinct ``astype(str)`` labels of ``series`` in order of first appearance,
    and each row's index among them: ``pd.factorize(series.astype(str))``, converted
    :data:`LABEL_BLOCK` rows at a time (the same labels and codes)."""
    names: dict[str, int] = {}
    codes = np.empty(len(series), dtype=np.int32)
    for start in range(0, len(series), LABEL_BLOCK):
        block = np.asarray(series.iloc[start : start + LABEL_BLOCK].astype(str), dtype=object)
        local, uniques = pd.factorize(block)  # strings: no missing value, no -1
        known = [names.setdefault(str(u), len(names)) for u in uniques]
        codes[start : start + len(block)] = np.asarray(known, dtype=np.int32)[local]
    return np.asarray(list(names), dtype=object), small_codes(codes, len(names))


def _factorised(series: pd.Series) -> tuple[Strings, npt.NDArray[np.signedinteger[Any]]] | None:
    """The distinct labels of a non-categorical column and each row's index among
    them, computed once inside :func:`remembered`; None outside it."""
    if _MEMO is None:
        return None
    return once(series, "labels", _factorise_labels)


def labels(frame: pd.DataFrame, column: str) -> Strings:
    """``frame[column].astype(str).to_numpy()``, equal value for value, in O(categories)
    string conversions on a categorical column."""
    series = frame[column]
    if isinstance(series.dtype, pd.CategoricalDtype):
        names = [str(c) for c in series.cat.categories]
        table = np.asarray([*names, str(np.nan)], dtype=object)
        codes = series.cat.codes.to_numpy()
        return np.asarray(table[codes], dtype=object)  # code -1 takes the last: "nan"
    known = _factorised(series)
    if known is not None:
        distinct, rows = known
        return np.asarray(distinct[rows], dtype=object)
    return np.asarray(series.astype(str).to_numpy(), dtype=object)


def label_codes(frame: pd.DataFrame, column: str, wanted: Sequence[str]) -> I64:
    """Per row, the index in ``wanted`` of its label (as :func:`labels` gives it), -1
    for any other: ``lang`` -> 0/1 without comparing a million strings."""
    series = frame[column]
    if isinstance(series.dtype, pd.CategoricalDtype):
        names = [str(c) for c in series.cat.categories] + [str(np.nan)]
        return np.asarray(_positions(names, wanted)[series.cat.codes.to_numpy()], np.int64)
    known = _factorised(series)
    if known is not None:
        distinct, rows = known
        return np.asarray(_positions(distinct, wanted)[rows], dtype=np.int64)
    values = labels(frame, column)
    out = np.full(len(values), -1, dtype=np.int64)
    for i, name in enumerate(wanted):
        out[values == name] = i
    return out


def _positions(names: Sequence[str] | Strings, wanted: Sequence[str]) -> I64:
    """Each name's index in ``wanted``, -1 for a name not there."""
    return np.asarray([wanted.index(n) if n in wanted else -1 for n in names], np.int64)


def value_codes(frame: pd.DataFrame, column: str) -> I64:
    """Per row, a code (>= 0) that is equal where the values are: categorical codes
    where the categories are distinct strings, else a factorisation of the values
    (every missing value one code)."""
    series = frame[column]
    if isinstance(series.dtype, pd.CategoricalDtype):
        names = [str(c) for c in series.cat.categories] + [str(np.nan)]
        if len(set(names)) == len(names):
            codes = series.cat.codes.to_numpy().astype(np.int64)
            return np.where(codes < 0, len(names) - 1, codes)
    # missing values (-1) share one code, as their one label ("<NA>" or "nan") does
    codes_raw, uniques = pd.factorize(series)
    codes = np.asarray(codes_raw, dtype=np.int64)
    return np.where(codes < 0, len(uniques), codes)
