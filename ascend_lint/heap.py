"""Giving freed memory back to the operating system between the phases of a run.

A run reads and parses every file: large blocks (a file's text, a parse's buffers) are freed while small
objects allocated meanwhile (summaries, findings) live on. glibc's `malloc` keeps the pages of the freed
blocks mapped when such an object lies above them in its heap, so the resident size grows with the files
read, not with what the run keeps. `malloc_trim(0)` returns every free page in the heap; it costs about a
millisecond, so it is called between phases (after the project's summaries, after the lint pass,
after the final model) and after every `PERIOD` bytes of files read (`after_reading`). Elsewhere (another C library, no ctypes) it does
nothing.
"""
from __future__ import annotations

import sys
from typing import Callable, Optional

PERIOD = 16 * 1024 * 1024  # bytes of files read between two trims

_trim: Optional[Callable[[int], int]] = None
_looked_up = False
_read_since = 0


def after_reading(size: int) -> None:
    """Count `size` bytes of a file read and processed; give memory back every PERIOD bytes."""
    global _read_since
    _read_since += size
    if _read_since >= PERIOD:
        give_back()


def give_back() -> None:
    """Return the heap's free pages to the operating system (glibc only)."""
    global _trim, _looked_up, _read_since
    _read_since = 0
    if not _looked_up:
        _looked_up = True
        _trim = _find_malloc_trim()
    if _trim is not None:
        _trim(0)


def _find_malloc_trim() -> Optional[Callable[[int], int]]:
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        trim = ctypes.CDLL(None).malloc_trim
    except (ImportError, OSError, AttributeError):  # (musl and others have no malloc_trim)
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim
