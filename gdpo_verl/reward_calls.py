"""Calling reward functions: imported by name, bound to the arguments they take, run with a time-out that holds.

A component's function runs in a worker process owned by a **worker host**: a small process started with
``python -c`` (so it never imports the caller's ``__main__``, whatever that imports: torch, verl, a notebook)
that preloads the reward functions' modules once and forks its workers from itself. A call over ``timeout_s`` is
stopped by killing its worker (``SIGKILL``, no grace period) and a fresh one is forked from the host at once, in
milliseconds; a worker that dies on its own (``os._exit``, a signal) is reported as such the moment it dies. So a
hung or runaway function never holds a slot past its time-out, never starves other components or samples, and
cannot take the reward worker down with it; a batch where calls hang costs about hung calls x ``timeout_s`` /
``processes`` more (``python bench/reward_calls.py --hang``). Processes are started and watched with the standard
library's ``multiprocessing`` (fork from the single-threaded host, sentinels, ``kill``).

A component declared ``cheap: true`` runs in a thread instead (no process hop; for fast, trusted, pure functions
such as the demo's regexes): its time-out still bounds the wait, but a thread cannot be killed, so a hung cheap
function keeps its thread until it returns.

Results cross the process boundary as plain values only: the worker turns what the function returned into a
float, None, a list of floats (per-token values) or a dict of those (``to_plain``), under the time-out, and the
caller reads them with an unpickler that refuses every class. A value that cannot be turned into numbers (a
string, a 2-D array, ``10**400``, an object whose ``__float__`` raises) becomes ``Unusable(reason)`` in its place.

Whatever a function does comes back as a ``CallOutcome``; nothing it raises escapes (``SystemExit`` and
``KeyboardInterrupt`` included), and an exception whose ``__str__`` raises is still described. A function's own
``TimeoutError`` is reported as an exception of the function, not as our time-out.

Light on purpose (standard library and ``gdpo_verl.core.choices`` only): the worker host imports this module,
not torch or verl.
Try it: ``python -m gdpo_verl.reward_calls gdpo_verl.demo.rewards format_reward '<a>7</a>'``.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import functools
import importlib
import importlib.util
import inspect
import io
import itertools
import json
import math
import multiprocessing
import multiprocessing.connection
import numbers
import os
import pickle
import signal
import subprocess
import sys
import threading
import time
from array import array
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gdpo_verl.core.choices import first_of  # standard library only

CALL_ARGS = ("data_source", "solution_str", "ground_truth", "extra_info", "response_length")  # tokens
EXPECTED = "expected a real number, None, per-token numbers or a dict"
HOST_PRELOAD = ("numpy",)  # call arguments often carry numpy values: imported once in the host, not per worker


def describe(error: BaseException) -> str:
    """``"TypeName: message"``, even when the exception's ``__str__`` raises."""
    try:
        text = str(error)
    except BaseException:  # noqa: BLE001  (a hostile __str__)
        text = "<unprintable message>"
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def _clip(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[:limit] + f"... [{len(text) - limit} more chars]"


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
def load_module(path: str):
    """Import a module path (``pkg.mod`` or ``pkg://pkg.mod``) or a ``.py`` file path (cached)."""
    try:
        if path.endswith(".py") or os.sep in path or path.startswith("file://"):
            return _module_from_file(path)
        return importlib.import_module(path.removeprefix("pkg://").replace("/", "."))
    except Exception as e:
        raise ImportError(f"cannot import reward function module {path!r}: {describe(e)}") from e


def load_function(path: str, name: str) -> Callable:
    """Import ``name`` from a module path (``pkg.mod`` or ``pkg://pkg.mod``) or a ``.py`` file path (cached)."""
    module = load_module(path)
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
            f"{where}.kwargs {first_of(shadowing)} shadow call arguments the manager passes (call arguments: "
            f"{', '.join(CALL_ARGS)}); remove them from kwargs"
        )
    unknown = sorted(k for k in kwargs if k not in params) if not takes_all else []
    if unknown:
        named = [n for n, p in params.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
        raise ValueError(
            f"{where}.kwargs {first_of(unknown)} are not parameters of {path}:{fn}; its parameters: {first_of(named)}"
        )
    accepted = tuple(a for a in CALL_ARGS if takes_all or a in params)
    return BoundCall(path=path, fn=fn, accepted=accepted, kwargs=dict(kwargs))


# ---------------------------------------------------------------------------------------------- plain values


@dataclass(frozen=True)
class Unusable:
    """In place of a returned value that is not numbers: ``reason`` says what it was (a failure for ``on_error``)."""

    reason: str


def _type_and_repr(value) -> str:
    try:
        shown = _clip(repr(value))
    except BaseException:  # noqa: BLE001  (a hostile __repr__)
        shown = "<unprintable>"
    return f"{type(value).__name__} {shown}"


def _number(result) -> float | Unusable:
    """One real number as a float: ``numbers.Real``, or a one-value array / tensor / numpy scalar (``.item()``)."""
    value = result
    if not isinstance(value, numbers.Real) and callable(getattr(value, "item", None)):
        try:
            value = value.item()  # numpy / torch scalars; a tensor of several values raises
        except BaseException as e:  # noqa: BLE001
            return Unusable(f"returned {type(result).__name__} that is not one number ({describe(e)})")
    if not isinstance(value, numbers.Real):
        return Unusable(f"returned {_type_and_repr(result)}, {EXPECTED}")
    try:
        number = float(value)
    except BaseException as e:  # noqa: BLE001  (10**400, a __float__ that raises)
        return Unusable(f"returned a number that does not fit a float ({describe(e)})")
    return number if type(number) is float else Unusable(f"returned {type(value).__name__} whose float is not a float")


def _is_sequence(value) -> bool:
    if isinstance(value, (list, tuple)):
        return True
    # a 1-D array or tensor; one of size 1 stays a number (``.item()``), as it always was
    return getattr(value, "ndim", None) == 1 and callable(getattr(value, "tolist", None)) and len(value) != 1


def _leaf(value) -> float | None | list[float] | Unusable:
    """One component's value as plain data: a float, None, or a list of floats (per-token values)."""
    try:
        if value is None:
            return None
        if _is_sequence(value):
            items = value if isinstance(value, (list, tuple)) else value.tolist()
            try:
                return array("d", items).tolist()  # C-level float() of each item; nested or non-numeric raises
            except (TypeError, ValueError, OverflowError) as e:
                if any(isinstance(item, (list, tuple)) for item in items):
                    return Unusable("returned a nested sequence, expected one number per token")
                return Unusable(f"returned a sequence that is not per-token numbers ({describe(e)})")
        return _number(value)
    except BaseException as e:  # noqa: BLE001  (__len__, __getattr__, tolist raising)
        return Unusable(f"returned {type(value).__name__} that could not be read ({describe(e)})")


def to_plain(result) -> float | None | list[float] | Unusable | dict:
    """What a reward function returned, as plain data: ``_leaf(result)``, or ``{str(key): _leaf(value)}`` for a
    dict. Runs in the worker, under the call's time-out; a hostile object can raise (a failure of the call) or hang
    (a time-out) there, never in the caller.

    >>> to_plain({"a": 1, "b": [0.5, 2]}), to_plain(True)
    ({'a': 1.0, 'b': [0.5, 2.0]}, 1.0)
    >>> to_plain("1.0")
    Unusable(reason="returned str '1.0', expected a real number, None, per-token numbers or a dict")
    """
    if isinstance(result, Mapping):
        return {str(key): _leaf(value) for key, value in result.items()}
    return _leaf(result)


@dataclass(frozen=True)
class CallOutcome:
    """What one call did: its ``value`` (plain, see ``to_plain``), or ``error`` (a description)."""

    value: Any = None
    error: str | None = None


def run_call(call: BoundCall, available: Mapping[str, Any]) -> CallOutcome:
    """Run ``call`` here; every exception, ``SystemExit`` and ``KeyboardInterrupt`` included, becomes an error."""
    try:
        return CallOutcome(value=to_plain(call.run(available)))
    except BaseException as e:  # noqa: BLE001  (a reward function's failure is data, handled by on_error)
        return CallOutcome(error=describe(e))


def _wire(value):
    """Plain data for pickling: an ``Unusable`` becomes a 1-tuple (only builtins cross the process boundary)."""
    if isinstance(value, Unusable):
        return (value.reason,)
    if isinstance(value, dict):
        return {k: _wire(v) for k, v in value.items()}
    return value


def _unwire(value):
    if isinstance(value, tuple):
        return Unusable(str(value[0]))
    if isinstance(value, dict):
        return {k: _unwire(v) for k, v in value.items()}
    return value


class _PlainUnpickler(pickle.Unpickler):
    """Reads builtins (numbers, strings, bytes, lists, tuples, dicts, None) and refuses every class."""

    def find_class(self, module, name):
        raise pickle.UnpicklingError(f"refused {module}.{name}: only plain values cross from reward workers")


def loads_plain(data: bytes):
    """``pickle.loads`` that can build builtins only: a payload naming any class or function raises."""
    return _PlainUnpickler(io.BytesIO(data)).load()


# ---------------------------------------------------------------------------------------------- the worker host


PR_SET_PDEATHSIG = 1  # prctl(2) option: the signal a process gets when its parent dies (Linux)


def _die_with_host(host_pid: int) -> None:
    """Have the kernel kill this worker when its host dies (a host killed outright cannot kill a worker stuck in a
    hung call, which would then spin forever as an orphan); exit now if the host is already gone."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the host's own clean-up still kills its workers
        pass
    if os.getppid() != host_pid:
        os._exit(0)


def _work(conn, close_fds: tuple[int, ...], host_pid: int) -> None:
    """A worker's loop: read pickled ``(call, available)``, answer pickled plain ``(value | None, error | None)``."""
    _die_with_host(host_pid)
    for fd in close_fds:  # the host's pipes to the caller and to other workers are not ours to touch
        try:
            os.close(fd)
        except OSError:
            pass
    while True:
        try:
            data = conn.recv_bytes()
        except (EOFError, OSError):
            return
        try:
            call, available = pickle.loads(data)
            outcome = run_call(call, available)
        except BaseException as e:  # noqa: BLE001
            outcome = CallOutcome(error=f"the call's arguments could not be read in the worker: {describe(e)}")
        conn.send_bytes(pickle.dumps((_wire(outcome.value), outcome.error), protocol=pickle.HIGHEST_PROTOCOL))


def _death(exitcode: int | None) -> str:
    if exitcode is not None and exitcode < 0:
        try:
            how = f"killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            how = f"killed by signal {-exitcode}"
    else:
        how = f"exit code {exitcode}"
    return f"the worker process died while running the call ({how})"


@dataclass
class _Worker:
    process: Any
    conn: Any
    task: int | None = None
    timeout_s: float = 0.0
    deadline: float = math.inf


def serve(processes: int, inbox_fd: int, outbox_fd: int) -> None:
    """The worker host's loop (single-threaded): forks ``processes`` workers and hands them calls one at a time.

    Reads ``(task id, timeout_s, module path, payload)`` from the caller; imports each new module path once (so
    workers forked later have it); sends the payload to an idle worker; answers ``(task id, kind, body)``:
    ``("value", pickled plain result)``, ``("timeout", None)`` after killing a worker past its deadline, or
    ``("died", description)`` the moment a worker dies. Dead and killed workers are replaced at once. Exits when
    the caller closes its end (or dies), killing its workers.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the caller's to handle
    inbox = multiprocessing.connection.Connection(inbox_fd, writable=False)
    outbox = multiprocessing.connection.Connection(outbox_fd, readable=False)
    fork = multiprocessing.get_context("fork")
    for name in HOST_PRELOAD:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001  (optional)
            pass
    queue: collections.deque = collections.deque()
    workers: list[_Worker] = []

    def start_worker() -> _Worker:
        mine, theirs = fork.Pipe()
        others = [inbox_fd, outbox_fd, mine.fileno()] + [w.conn.fileno() for w in workers if not w.conn.closed]
        process = fork.Process(target=_work, args=(theirs, tuple(others), os.getpid()), daemon=True)
        process.start()
        theirs.close()
        return _Worker(process, mine)

    def replace(worker: _Worker) -> None:
        worker.conn.close()
        worker.process.join()
        workers[workers.index(worker)] = start_worker()

    def answer(task: int, kind: str, body) -> None:
        outbox.send_bytes(pickle.dumps((task, kind, body), protocol=pickle.HIGHEST_PROTOCOL))

    workers.extend(start_worker() for _ in range(processes))
    try:
        while True:
            busy = [w for w in workers if w.task is not None]
            deadline = min((w.deadline for w in busy), default=math.inf)
            wait_s = None if deadline == math.inf else max(0.0, deadline - time.monotonic())
            handles = [inbox] + [w.conn for w in busy] + [w.process.sentinel for w in workers]
            ready = set(multiprocessing.connection.wait(handles, wait_s))
            if inbox in ready:
                while inbox.poll():
                    task, timeout_s, path, payload = pickle.loads(inbox.recv_bytes())
                    try:
                        load_module(path)  # once per path: later forks inherit it; a failure shows in the call
                    except Exception:  # noqa: BLE001
                        pass
                    queue.append((task, timeout_s, payload))
            now = time.monotonic()
            for w in list(workers):
                if w.task is not None and w.conn in ready:
                    try:
                        body = w.conn.recv_bytes()
                    except (EOFError, OSError):
                        w.process.join()
                        answer(w.task, "died", _death(w.process.exitcode))
                        replace(w)
                        continue
                    answer(w.task, "value", body)
                    w.task, w.deadline = None, math.inf
                elif w.process.sentinel in ready:
                    w.process.join()
                    if w.task is not None:
                        answer(w.task, "died", _death(w.process.exitcode))
                    replace(w)
                elif w.task is not None and now >= w.deadline:
                    w.process.kill()
                    answer(w.task, "timeout", w.timeout_s)
                    replace(w)
            for w in workers:
                if not queue:
                    break
                if w.task is None:
                    w.task, w.timeout_s, payload = queue.popleft()
                    w.deadline = time.monotonic() + w.timeout_s
                    w.conn.send_bytes(payload)  # a worker that died meanwhile shows up as dead next round
    except (EOFError, BrokenPipeError, ConnectionResetError):
        pass  # the caller closed its end or died
    finally:
        for w in workers:
            w.process.kill()
        for w in workers:
            w.process.join()


def _settle(future: concurrent.futures.Future, outcome: CallOutcome) -> None:
    """Resolve ``future`` unless its caller cancelled it meanwhile (a cancelled await cancels the future)."""
    try:
        future.set_result(outcome)
    except concurrent.futures.InvalidStateError:
        pass


@dataclass
class _Host:
    process: subprocess.Popen
    outbox: Any  # Connection to the host
    pending: dict = field(default_factory=dict)  # task id -> concurrent.futures.Future
    dead: str | None = None
    # serializes writers to ``outbox``; never held together with RewardCaller._lock: a full pipe blocks the writer
    # until the host reads, and the host reads only once the answers it is sending are drained by the reader
    # thread, which needs RewardCaller._lock
    send_lock: threading.Lock = field(default_factory=threading.Lock)


class RewardCaller:
    """Runs bound calls with a time-out: in worker processes (killable), or in threads for ``cheap`` calls.

    ``processes``: how many calls run at once in worker processes (the host and its workers start on first use).
    """

    def __init__(self, processes: int = 2, threads: int = 8):
        self.processes = processes
        self.threads = threads
        self._host: _Host | None = None
        self._lock = threading.Lock()
        self._ids = itertools.count()
        self._thread_pool = None

    def _start_host(self) -> _Host:
        to_host_r, to_host_w = os.pipe()
        from_host_r, from_host_w = os.pipe()
        code = (
            "import json, sys; sys.path[:] = json.loads(sys.argv[1]); "
            "from gdpo_verl.reward_calls import serve; serve(*map(int, sys.argv[2:]))"
        )
        args = [json.dumps(sys.path), str(self.processes), str(to_host_r), str(from_host_w)]
        try:
            process = subprocess.Popen(
                [sys.executable, "-c", code, *args], pass_fds=(to_host_r, from_host_w), stdin=subprocess.DEVNULL
            )
        finally:
            os.close(to_host_r)
            os.close(from_host_w)
        host = _Host(process, multiprocessing.connection.Connection(to_host_w, readable=False))
        inbox = multiprocessing.connection.Connection(from_host_r, writable=False)
        threading.Thread(target=self._read_answers, args=(host, inbox), daemon=True, name="gdpo-reward-host").start()
        return host

    def _read_answers(self, host: _Host, inbox) -> None:
        """Resolve each call's future from the host's answers; when the host is gone, fail every pending call."""
        try:
            while True:
                task, kind, body = loads_plain(inbox.recv_bytes())
                with self._lock:
                    future = host.pending.pop(task, None)
                if future is not None:
                    _settle(future, self._outcome(kind, body))
        except EOFError:
            reason = "it exited"
        except Exception as e:  # noqa: BLE001  (a broken pipe, a frame that is not ours)
            reason = describe(e)
        finally:
            inbox.close()
        try:
            code = host.process.wait(timeout=1)
        except subprocess.TimeoutExpired:
            code = None
        with self._lock:
            host.dead = f"the reward worker host is gone ({reason}; exit code {code})"
            pending, host.pending = host.pending, {}
            if self._host is host:
                self._host = None
        for future in pending.values():
            _settle(future, CallOutcome(error=host.dead))

    @staticmethod
    def _outcome(kind: str, body) -> CallOutcome:
        if kind == "timeout":
            return CallOutcome(error=f"timed out after {body} s")
        if kind != "value":
            return CallOutcome(error=str(body))
        try:
            value, error = loads_plain(body)
        except Exception as e:  # noqa: BLE001
            return CallOutcome(error=f"the worker sent a result that is not plain data ({describe(e)})")
        return CallOutcome(value=_unwire(value), error=error)

    def _submit(self, path: str, timeout_s: float, payload: bytes) -> concurrent.futures.Future:
        future: concurrent.futures.Future = concurrent.futures.Future()
        with self._lock:
            if self._host is None:
                self._host = self._start_host()
            host, task = self._host, next(self._ids)
            host.pending[task] = future
        try:
            with host.send_lock:  # not under self._lock (see _Host.send_lock)
                host.outbox.send_bytes(pickle.dumps((task, timeout_s, path, payload), protocol=5))
        except OSError as e:  # the host died; its reader thread fails the pending calls
            with self._lock:
                host.pending.pop(task, None)
            _settle(future, CallOutcome(error=f"the reward worker host is gone ({describe(e)})"))
        return future

    def _threads(self) -> concurrent.futures.ThreadPoolExecutor:
        if self._thread_pool is None:
            self._thread_pool = concurrent.futures.ThreadPoolExecutor(self.threads, thread_name_prefix="gdpo-cheap")
        return self._thread_pool

    async def call(
        self, call: BoundCall, available: Mapping[str, Any], timeout_s: float, cheap: bool = False
    ) -> CallOutcome:
        """Run ``call`` with ``available`` arguments; a call still running after ``timeout_s`` s is stopped."""
        if cheap:
            future = asyncio.get_running_loop().run_in_executor(self._threads(), run_call, call, dict(available))
            try:
                return await asyncio.wait_for(future, timeout=timeout_s)
            except (TimeoutError, asyncio.TimeoutError):
                return CallOutcome(error=f"timed out after {timeout_s} s")
        try:
            payload = pickle.dumps((call, dict(available)), protocol=pickle.HIGHEST_PROTOCOL)
        except BaseException as e:  # noqa: BLE001  (an argument that does not pickle)
            return CallOutcome(error=f"the call's arguments cannot be sent to a worker process: {describe(e)}")
        return await asyncio.wrap_future(self._submit(call.path, timeout_s, payload))

    def close(self) -> None:
        """Stop the host (its workers are killed) and the threads; pending calls fail."""
        with self._lock:
            host, self._host = self._host, None
        if host is not None:
            host.outbox.close()  # the host sees end-of-file, kills its workers and exits
            try:
                host.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                host.process.kill()
                host.process.wait()
        if self._thread_pool is not None:
            self._thread_pool.shutdown(wait=False, cancel_futures=True)
            self._thread_pool = None


if __name__ == "__main__":
    module, function, response = sys.argv[1:4]
    bound = bind(module, function, {}, "cli")
    print(run_call(bound, {"data_source": "cli", "solution_str": response, "ground_truth": "7", "extra_info": None}))
