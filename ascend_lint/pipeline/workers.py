"""Worker processes shared by the run's two parallel steps (text summaries, linting): the pool's start
method and the chunks of work handed to it."""
from __future__ import annotations

import multiprocessing
import os
import threading
from concurrent.futures import ProcessPoolExecutor
from typing import Dict, Iterator, List, Sequence, TypeVar

CHUNKS_PER_WORKER = 8  # enough small tasks that the last ones balance the load
MIN_CHUNK_BYTES = 32 * 1024
FILE_COST = 2048  # a file's cost besides its bytes (open, stat, hash, per-file set-up), in bytes' worth of work

Item = TypeVar("Item", bound=tuple)  # a task: (path, ...)


def map_in_workers(function, chunks: Sequence, jobs: int) -> Iterator:
    """`function(chunk)` for each chunk, in up to `jobs` worker processes, results in the chunks' order."""
    with ProcessPoolExecutor(min(jobs, len(chunks)), mp_context=pool_context()) as pool:
        yield from pool.map(function, chunks)


def make_chunks(todo: Sequence[Item], sizes: Dict[str, int], jobs: int) -> List[List[Item]]:
    """Tasks of about equal weight (a file's bytes plus FILE_COST), the biggest files first (they would
    otherwise finish last); an item is a tuple whose first field is the file's path."""
    ordered = sorted(todo, key=lambda item: -sizes.get(item[0], 0))
    total = sum(sizes.get(item[0], 0) + FILE_COST for item in todo)
    target = max(total // (jobs * CHUNKS_PER_WORKER), MIN_CHUNK_BYTES)
    chunks: List[List[Item]] = []
    current: List[Item] = []
    weight = 0
    for item in ordered:
        current.append(item)
        weight += sizes.get(item[0], 0) + FILE_COST
        if weight >= target:
            chunks.append(current)
            current, weight = [], 0
    if current:
        chunks.append(current)
    return chunks


def pool_context() -> multiprocessing.context.BaseContext:
    """fork where it is safe (POSIX, no other threads): workers start in milliseconds."""
    methods = multiprocessing.get_all_start_methods()
    if "fork" in methods and threading.active_count() == 1 and os.name == "posix":
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context()

