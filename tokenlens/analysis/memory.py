"""Memory given back to the system during an analysis (glibc and Arrow; nothing elsewhere).

``analyze`` builds large arrays one after another (a run's chunks, the study's frame,
the figures' per-row temporaries); freed memory that the allocator keeps would add up
in the resident set. :func:`bound_heap` sends large arrays to the system directly,
:func:`give_back_memory` returns what the heap and Arrow's pool hold free. Called by
the join (:mod:`tokenlens.analysis.stream`), the pipeline and the figures.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools

import pyarrow as pa

MMAP_THRESHOLD = 1 << 20
"""Arrays of at least this many bytes get memory of their own from the system, given
back as soon as they are freed (:func:`bound_heap`)."""


@functools.cache
def _libc() -> ctypes.CDLL | None:
    """glibc, when this process runs on it (``mallopt`` and ``malloc_trim``)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None
    return libc if hasattr(libc, "malloc_trim") and hasattr(libc, "mallopt") else None


def bound_heap() -> None:
    """Fix glibc's mmap threshold at :data:`MMAP_THRESHOLD` (nothing elsewhere). glibc
    raises it, by default, to the size of the largest array freed (up to 32 MiB), after
    which the figures' per-row masks and codes of a few million rows come from the
    heap, whose freed pages stay in the resident set: the figures' temporaries, each
    freed in turn, then added up in the peak."""
    libc = _libc()
    if libc is not None:
        libc.mallopt(-3, MMAP_THRESHOLD)  # M_MMAP_THRESHOLD


def give_back_memory() -> None:
    """Return free memory to the system: Arrow's pool's (a run's tables, once joined)
    and the C heap's free pages (glibc's ``malloc_trim``; nothing elsewhere). A chunk's
    arrays (smaller than :data:`MMAP_THRESHOLD`) are freed into the heap, where they
    would stay part of the resident set: the join's chunks and the study's frame are
    built one after the other, so without this the peak holds both. The figures call
    it between their sections: their many small per-group arrays fragment the heap,
    and at 10.4 million events about 1 GiB of freed heap stayed resident by the end."""
    pa.default_memory_pool().release_unused()
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)
