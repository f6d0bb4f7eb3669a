"""Reward calls under hostile functions: what they return, how they die, how long they hang, who imports what.

Run: .venv/bin/python -m pytest tests/test_reward_calls_on_cpu.py

Every hostile case is followed by a healthy call on the same ``RewardCaller``, which must still succeed.
"""

import asyncio
import os
import pickle
import subprocess
import sys
import textwrap
import time

import psutil
import pytest

from gdpo_verl.reward_calls import CallOutcome, RewardCaller, Unusable, bind, loads_plain, to_plain

FUNCS = textwrap.dedent(
    """
    import numbers, os, signal, sys, time, types

    def healthy(solution_str):
        return {"a": 1, "b": [0.5, 2]}

    def echo_length(solution_str):
        return {"n": len(solution_str), "pad": [0.5] * 200}

    def hang(solution_str):
        while True:
            pass

    def exits(solution_str):
        os._exit(0)

    def killed(solution_str):
        os.kill(os.getpid(), signal.SIGKILL)

    def worker_only_class(solution_str):  # unpickling this in the caller would fail: the class is not there
        module = types.ModuleType("only_in_the_worker")
        exec("class Score(float):\\n    pass", module.__dict__)
        sys.modules["only_in_the_worker"] = module
        return module.Score(0.5)

    class _Real(numbers.Real):  # every abstract method, as raising stubs; __float__ is what matters
        locals().update({n: (lambda self, *a: 0) for n in numbers.Real.__abstractmethods__})

    class DivZeroFloat(_Real):
        def __float__(self):
            return 1 / 0

    class LoopFloat(_Real):
        def __float__(self):
            while True:
                pass

    class HangingUnpickle(float):
        def __reduce__(self):
            return (time.sleep, (3600,))

    class RaisingGetattr:
        def __getattr__(self, name):
            raise RuntimeError("no attribute for you")

    class BadLen:
        ndim = 1
        def tolist(self):
            return [1.0]
        def __len__(self):
            raise RuntimeError("no length")

    class ItemExits:
        def item(self):
            raise SystemExit(4)

    def div_zero(solution_str):
        return DivZeroFloat()

    def loop_float(solution_str):
        return LoopFloat()

    def hanging_unpickle(solution_str):
        return HangingUnpickle(1.0)

    def raising_getattr(solution_str):
        return RaisingGetattr()

    def bad_len(solution_str):
        return BadLen()

    def item_exits(solution_str):
        return ItemExits()

    def in_a_dict(solution_str):
        return {"good": 1.0, "bad": DivZeroFloat(), "none": None}

    def hostile_keys(solution_str):
        class Key:
            def __str__(self):
                raise ValueError("no name")
            def __hash__(self):
                return 1
        return {Key(): 1.0}
    """
)


@pytest.fixture(scope="module")
def module_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("rc") / "rc_rewards.py"
    path.write_text(FUNCS)
    return str(path)


@pytest.fixture(scope="module")
def caller():
    caller = RewardCaller(processes=2)
    yield caller
    caller.close()


def call(caller, module_path, fn, timeout_s=10.0) -> tuple[CallOutcome, float]:
    bound = bind(module_path, fn, {}, "test")
    start = time.monotonic()
    outcome = asyncio.run(caller.call(bound, {"solution_str": "x"}, timeout_s))
    return outcome, time.monotonic() - start


def assert_healthy(caller, module_path):
    outcome, _ = call(caller, module_path, "healthy")
    assert outcome == CallOutcome(value={"a": 1.0, "b": [0.5, 2.0]}), outcome


@pytest.mark.parametrize(
    "fn,reason",
    [
        ("worker_only_class", None),  # a float subclass: it arrives as the plain float 0.5
        ("hanging_unpickle", None),  # a float subclass whose pickle would hang the caller: arrives as 1.0
        ("div_zero", "does not fit a float (ZeroDivisionError: division by zero)"),
        ("raising_getattr", "could not be read (RuntimeError: no attribute for you)"),
        ("bad_len", "could not be read (RuntimeError: no length)"),
        ("item_exits", "that is not one number (SystemExit: 4)"),
    ],
)
def test_a_hostile_return_value_is_converted_in_the_worker_and_the_pool_survives(caller, module_path, fn, reason):
    outcome, _ = call(caller, module_path, fn)
    assert outcome.error is None
    if reason is None:
        assert type(outcome.value) is float
    else:
        assert isinstance(outcome.value, Unusable) and reason in outcome.value.reason, outcome
    assert_healthy(caller, module_path)


def test_a_dict_keeps_its_good_entries_beside_a_bad_one(caller, module_path):
    outcome, _ = call(caller, module_path, "in_a_dict")
    assert outcome.value["good"] == 1.0 and outcome.value["none"] is None
    assert isinstance(outcome.value["bad"], Unusable) and "ZeroDivisionError" in outcome.value["bad"].reason
    outcome, _ = call(caller, module_path, "hostile_keys")  # the conversion itself raising: a failure of the call
    assert outcome.value is None and outcome.error == "ValueError: no name"
    assert_healthy(caller, module_path)


def test_a_float_that_loops_is_a_time_out_in_the_worker_not_a_hang_in_the_caller(caller, module_path):
    outcome, took = call(caller, module_path, "loop_float", timeout_s=0.5)
    assert outcome == CallOutcome(error="timed out after 0.5 s") and took < 5
    assert_healthy(caller, module_path)


@pytest.mark.parametrize("fn,how", [("exits", "exit code 0"), ("killed", "killed by SIGKILL")])
def test_a_worker_that_dies_is_reported_at_once_not_as_a_time_out(caller, module_path, fn, how):
    outcome, took = call(caller, module_path, fn, timeout_s=60)
    assert outcome == CallOutcome(error=f"the worker process died while running the call ({how})")
    assert took < 10, took  # far below the 60 s time-out
    assert_healthy(caller, module_path)


def test_hung_calls_are_stopped_and_healthy_ones_go_on(caller, module_path):
    async def batch():
        hang, ok = bind(module_path, "hang", {}, "t"), bind(module_path, "healthy", {}, "t")
        calls = [caller.call(hang, {"solution_str": ""}, 0.3) for _ in range(6)]
        return await asyncio.gather(*calls, *(caller.call(ok, {"solution_str": ""}, 0.3) for _ in range(6)))

    outcomes = asyncio.run(batch())
    assert all(o.error == "timed out after 0.3 s" for o in outcomes[:6])
    assert all(o.value == {"a": 1.0, "b": [0.5, 2.0]} for o in outcomes[6:])


def test_a_batch_larger_than_the_pipes_does_not_deadlock(module_path):
    # 4,000 concurrent calls (a 512 x 8 training batch) whose requests and answers each take far more than a pipe
    # holds (64 KiB): the caller blocks writing while the host blocks answering; the reader thread must still
    # drain the answers. It once needed the lock the blocked writer held: every reward worker hung for good.
    import threading

    caller = RewardCaller(processes=1)
    bound = bind(module_path, "echo_length", {}, "t")
    result = {}

    def run():
        async def batch():
            return await asyncio.gather(*(caller.call(bound, {"solution_str": "x" * 300}, 60) for _ in range(4000)))

        result["outcomes"] = asyncio.run(batch())

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout=120)
    try:
        assert not thread.is_alive(), "the caller deadlocked with its worker host"
        assert all(o.value is not None and o.value["n"] == 300.0 for o in result["outcomes"])
    finally:
        if thread.is_alive() and caller._host is not None:
            caller._host.process.kill()  # unblocks the stuck writer (broken pipe)
            thread.join(timeout=30)
        caller.close()


def test_a_lost_host_fails_pending_calls_and_the_next_call_starts_a_new_one(module_path):
    caller = RewardCaller(processes=1)
    try:
        bound = bind(module_path, "hang", {}, "t")

        workers = []

        async def hang_then_kill_host():
            pending = asyncio.ensure_future(caller.call(bound, {"solution_str": ""}, 60))
            await asyncio.sleep(1.0)
            workers.extend(psutil.Process(caller._host.process.pid).children())
            caller._host.process.kill()
            return await pending

        outcome = asyncio.run(hang_then_kill_host())
        assert outcome.error.startswith("the reward worker host is gone (it exited; exit code -9)"), outcome
        # the worker stuck in the hung call dies with its host instead of spinning on as an orphan
        assert workers and not psutil.wait_procs(workers, timeout=5)[1]
        assert_healthy(caller, module_path)
    finally:
        caller.close()


def test_arguments_that_do_not_pickle_are_a_failure_of_the_call(caller, module_path):
    bound = bind(module_path, "healthy", {}, "t")
    outcome = asyncio.run(caller.call(bound, {"solution_str": lambda: 0}, 5))
    assert outcome.error.startswith("the call's arguments cannot be sent to a worker process: ")
    assert_healthy(caller, module_path)


def test_the_caller_unpickles_builtins_only():
    assert loads_plain(pickle.dumps((1, "value", {"a": [1.0, None], "b": ("why",)}))) == (
        1,
        "value",
        {"a": [1.0, None], "b": ("why",)},
    )
    for hostile in (Unusable("x"), os.system, subprocess.Popen):
        with pytest.raises(pickle.UnpicklingError, match="only plain values cross"):
            loads_plain(pickle.dumps(hostile))


def test_to_plain_turns_arrays_and_scalars_into_floats():
    np = pytest.importorskip("numpy")
    torch = pytest.importorskip("torch")
    assert to_plain(np.float32(0.5)) == 0.5 and to_plain(torch.tensor([2.0])) == 2.0
    assert to_plain(np.arange(3)) == [0.0, 1.0, 2.0] and to_plain(torch.ones(2)) == [1.0, 1.0]
    assert to_plain(10**400).reason.startswith("returned a number that does not fit a float")
    assert to_plain([[1.0], [2.0]]).reason == "returned a nested sequence, expected one number per token"
    assert to_plain(np.ones((2, 2))).reason.startswith("returned ndarray that is not one number")


MAIN = textwrap.dedent(
    """
    import asyncio, os, sys
    with open(sys.argv[2], "a") as f:  # one line per import of this main module, in any process
        f.write(f"{__name__}\\n")
    if __name__ == "__main__":
        from gdpo_verl.reward_calls import RewardCaller, bind
        caller = RewardCaller(processes=2)
        hang, ok = bind(sys.argv[1], "hang", {}, "t"), bind(sys.argv[1], "healthy", {}, "t")
        async def run():
            calls = [caller.call(hang, {"solution_str": ""}, 0.2) for _ in range(4)]
            return await asyncio.gather(*calls, caller.call(ok, {"solution_str": ""}, 5))
        outcomes = asyncio.run(run())
        caller.close()
        assert [o.error for o in outcomes] == ["timed out after 0.2 s"] * 4 + [None], outcomes
    """
)


def test_workers_never_import_the_callers_main_module(module_path, tmp_path):
    script, log = tmp_path / "heavy_main.py", tmp_path / "imports.log"
    script.write_text(MAIN)
    done = subprocess.run([sys.executable, str(script), module_path, str(log)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert log.read_text().splitlines() == ["__main__"]  # 4 workers killed and replaced, none re-imported it


def test_a_cancelled_call_leaves_the_host_serving_the_others(caller, module_path):
    async def cancel_one():
        bound = bind(module_path, "hang", {}, "t")
        task = asyncio.ensure_future(caller.call(bound, {"solution_str": ""}, 0.5))
        await asyncio.sleep(0.1)
        task.cancel()
        await asyncio.sleep(1.0)  # the host answers the cancelled call's time-out meanwhile

    asyncio.run(cancel_one())
    assert caller._host is not None and caller._host.dead is None
    assert_healthy(caller, module_path)
