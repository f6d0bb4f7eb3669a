"""Calling reward functions: imported by name, bound to the arguments they take, run with a time-out that holds.

A component's function runs in a ``pebble`` process pool: a call over ``timeout_s`` is stopped by killing its
worker process (pebble starts a fresh one), so a hung or runaway function never holds a slot past its time-out,
never starves other components or samples, and cannot take the reward worker down with it. A component declared
``cheap: true`` runs in a thread instead (no process hop; for fast, trusted, pure functions such as the demo's
regexes): its time-out still bounds the wait, but a thread cannot be killed, so a hung cheap function keeps its
thread until it returns.

Whatever a function does comes back as a ``CallOutcome``; nothing it raises escapes (``SystemExit`` and
``KeyboardInterrupt`` included), and an exception whose ``__str__`` raises is still described. A function's own
``TimeoutError`` is reported as an exception of the function, not as our time-out.

Light on purpose (standard library and pebble only): every pool worker imports this module, not torch or verl.
Try it: ``python -m gdpo_verl.reward_calls gdpo_verl.demo.rewards format_reward '<a>7</a>'``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import importlib
import importlib.util
import inspect
import multiprocessing
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

CALL_ARGS = ("data_source", "solution_str", "ground_truth", "extra_info", "response_length")  # tokens


def describe(error: BaseException) -> str:
    """``"TypeName: message"``, even when the exception's ``__str__`` raises."""
    try:
        text = str(error)
    except BaseException:  # noqa: BLE001  (a hostile __str__)
        text = "<unprintable message>"
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def _module_from_file(path: str):
    path = path.removeprefix("file://")
    name = "gdpo_verl_reward_" + os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"not a Python file: {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@functools.lru_cache(maxsize=256)
def load_function(path: str, name: str) -> Callable:
    """Import ``name`` from a module path (``pkg.mod`` or ``pkg://pkg.mod``) or a ``.py`` file path (cached)."""
    try:
        if path.endswith(".py") or os.sep in path or path.startswith("file://"):
            module = _module_from_file(path)
        else:
            module = importlib.import_module(path.removeprefix("pkg://").replace("/", "."))
    except Exception as e:
        raise ImportError(f"cannot import reward function module {path!r}: {describe(e)}") from e
    function = getattr(module, name, None)
    if not callable(function):
        public = sorted(n for n, v in vars(module).items() if callable(v) and not n.startswith("_"))
        raise ImportError(f"reward module {path!r} has no function {name!r}; callables there: {public}")
    return function


@dataclass(frozen=True)
class BoundCall:
    """A reward function by name, with the call arguments it accepts and its fixed keyword arguments (picklable)."""

    path: str
    fn: str
    accepted: tuple[str, ...]
    kwargs: Mapping[str, Any] = field(default_factory=dict)

    def run(self, available: Mapping[str, Any]) -> Any:
        function = load_function(self.path, self.fn)
        return function(**{a: available[a] for a in self.accepted}, **self.kwargs)


def bind(path: str, fn: str, kwargs: Mapping[str, Any], where: str) -> BoundCall:
    """Import the function now and check ``kwargs`` against its signature; errors name ``where`` (the config key).

    The function is called with whichever of ``CALL_ARGS`` it accepts (all when it takes ``**kwargs``) plus
    ``kwargs``, which must be parameters it has (or be taken by its ``**kwargs``) and must not be call arguments.
    """
    function = load_function(path, fn)
    try:
        params = inspect.signature(function).parameters
    except (TypeError, ValueError):
        params = {}
    takes_all = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    shadowing = sorted(set(kwargs) & set(CALL_ARGS))
    if shadowing:
        raise ValueError(
            f"{where}.kwargs {shadowing} shadow call arguments the manager passes (call arguments: "
            f"{', '.join(CALL_ARGS)}); remove them from kwargs"
        )
    unknown = sorted(k for k in kwargs if k not in params) if not takes_all else []
    if unknown:
        named = [n for n, p in params.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
        raise ValueError(f"{where}.kwargs {unknown} are not parameters of {path}:{fn}; its parameters: {named}")
    accepted = tuple(a for a in CALL_ARGS if takes_all or a in params)
    return BoundCall(path=path, fn=fn, accepted=accepted, kwargs=dict(kwargs))


@dataclass(frozen=True)
class CallOutcome:
    """What one call did: its ``value``, or ``error`` (a description); ``timed_out`` when we stopped it."""

    value: Any = None
    error: str | None = None
    timed_out: bool = False


def run_call(call: BoundCall, available: Mapping[str, Any]) -> CallOutcome:
    """Run ``call`` here; every exception, ``SystemExit`` and ``KeyboardInterrupt`` included, becomes an error."""
    try:
        return CallOutcome(value=call.run(available))
    except BaseException as e:  # noqa: BLE001  (a reward function's failure is data, handled by on_error)
        return CallOutcome(error=describe(e))


class RewardCaller:
    """Runs bound calls with a time-out: in a process pool (killable), or in threads for ``cheap`` calls.

    ``processes``: pool size (started on first use, ``spawn`` context so no parent thread state is inherited).
    """

    def __init__(self, processes: int = 2, threads: int = 8):
        self.processes = processes
        self.threads = threads
        self._pool = None
        self._thread_pool = None

    def _process_pool(self):
        if self._pool is None:
            from pebble import ProcessPool

            self._pool = ProcessPool(max_workers=self.processes, context=multiprocessing.get_context("spawn"))
        return self._pool

    def _threads(self) -> concurrent.futures.ThreadPoolExecutor:
        if self._thread_pool is None:
            self._thread_pool = concurrent.futures.ThreadPoolExecutor(self.threads, thread_name_prefix="gdpo-cheap")
        return self._thread_pool

    async def call(
        self, call: BoundCall, available: Mapping[str, Any], timeout_s: float, cheap: bool = False
    ) -> CallOutcome:
        """Run ``call`` with ``available`` arguments; a call still running after ``timeout_s`` s is stopped."""
        try:
            if cheap:
                future = asyncio.get_running_loop().run_in_executor(self._threads(), run_call, call, dict(available))
                return await asyncio.wait_for(future, timeout=timeout_s)
            pending = self._process_pool().schedule(run_call, args=(call, dict(available)), timeout=timeout_s)
            return await asyncio.wrap_future(pending)
        except (TimeoutError, asyncio.TimeoutError, concurrent.futures.TimeoutError):
            return CallOutcome(error=f"timed out after {timeout_s} s", timed_out=True)
        except BaseException as e:  # noqa: BLE001  (a worker that died, an argument that does not pickle, ...)
            return CallOutcome(error=f"the call did not complete: {describe(e)}")

    def close(self) -> None:
        """Stop the pools (their workers are killed)."""
        if self._pool is not None:
            self._pool.stop()
            self._pool.join()
            self._pool = None
        if self._thread_pool is not None:
            self._thread_pool.shutdown(wait=False, cancel_futures=True)
            self._thread_pool = None


if __name__ == "__main__":
    module, function, response = sys.argv[1:4]
    bound = bind(module, function, {}, "cli")
    print(run_call(bound, {"data_source": "cli", "solution_str": response, "ground_truth": "7", "extra_info": None}))
