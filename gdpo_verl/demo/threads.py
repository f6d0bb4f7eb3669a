"""A context manager that runs torch with a given number of intra-op CPU threads, then restores the old one.

The demo's tiny model gains nothing from more threads, and on a busy 2-core machine 2 threads measured
10-15x slower than 1 (thread oversubscription: 7.5-11 s vs 0.7 s to sample 400 answers, 0.6 s vs 0.05 s
per warm-start step). Used by ``gdpo_verl.demo.warmstart`` and ``gdpo_verl.demo.evaluate``:

    >>> import torch
    >>> before = torch.get_num_threads()
    >>> with torch_threads(1):
    ...     torch.get_num_threads()
    1
    >>> torch.get_num_threads() == before
    True

Run the example with ``python -m doctest -v gdpo_verl/demo/threads.py``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch


@contextlib.contextmanager
def torch_threads(count: int) -> Iterator[None]:
    """Inside the block torch uses ``count`` intra-op threads; the previous count comes back afterwards."""
    previous = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(previous)
