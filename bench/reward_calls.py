"""Reward calls under hung functions, and calls per second: the call path before and after, side by side.

Run (under the heavy-job lock): ``python bench/reward_calls.py [--samples 2000] [--timeout-s 0.25]
[--processes 2] [--limit-s 150] [--fractions 0% 1% 33%] [--paths before after]``. For 0%, 1% and 33% of calls
hanging, with a light and with a heavy main module, it prints the wall time of scoring ``--samples`` calls with
the call path before this change (a ``pebble`` process pool with the ``spawn`` context: every replaced worker
re-imports the caller's main module) and after it (the worker host of ``gdpo_verl.reward_calls``), against the
floor ``hung calls x timeout_s / processes``. Each case runs in a fresh child process whose main module is this
file; with ``heavy`` it imports torch and verl at the top, as a training script or notebook does
(``GDPO_BENCH_HEAVY_MAIN=1``). A case still running after ``--limit-s`` s is stopped and shown as ``> limit``.
The verdict column checks the target: after <= 1.25 x floor + the healthy calls' own time (the same main
module's 0% case).

``python bench/reward_calls.py --throughput [--samples 512] [--rounds 5] [--processes 2]``: calls per second per
reward worker through ``MultiRewardManager``, killable process calls vs ``cheap`` (thread) calls, modes
alternating round by round (the demo's toy rewards, microseconds each: the figure is the call path's own cost).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import multiprocessing
import os
import statistics
import subprocess
import sys
import time

if os.environ.get("GDPO_BENCH_HEAVY_MAIN") == "1":  # a heavy main module: what a re-import of it costs
    import torch  # noqa: F401
    import verl  # noqa: F401

from gdpo_verl.reward_calls import CallOutcome, RewardCaller, bind, describe, run_call

HANG_FN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hanging_rewards.py")
FRACTIONS = {"0%": 0, "1%": 100, "33%": 3}  # one call in N hangs


class PebbleSpawnCaller:
    """The call path before the worker host: a pebble pool, spawn context, the function's raw return pickled."""

    def __init__(self, processes: int):
        from pebble import ProcessPool

        self.pool = ProcessPool(max_workers=processes, context=multiprocessing.get_context("spawn"))

    async def call(self, call, available, timeout_s: float) -> CallOutcome:
        try:
            future = self.pool.schedule(run_call, args=(call, dict(available)), timeout=timeout_s)
            return await asyncio.wrap_future(future)
        except (TimeoutError, asyncio.TimeoutError):
            return CallOutcome(error=f"timed out after {timeout_s} s")
        except BaseException as e:  # noqa: BLE001
            return CallOutcome(error=f"the call did not complete: {describe(e)}")

    def close(self) -> None:
        self.pool.stop()
        self.pool.join()


def run_case(path: str, samples: int, every: int, timeout_s: float, processes: int, limit_s: float) -> dict:
    """One case in this process: ``samples`` concurrent calls, one in ``every`` hanging (0: none)."""
    call = bind(HANG_FN, "maybe_hang", {}, "bench")
    hangs = [every > 0 and i % every == 0 for i in range(samples)]
    start = time.perf_counter()
    caller = PebbleSpawnCaller(processes) if path == "before" else RewardCaller(processes=processes)

    async def score_all():
        calls = (caller.call(call, {"solution_str": "hang" if h else "ok"}, timeout_s) for h in hangs)
        return await asyncio.wait_for(asyncio.gather(*calls), limit_s)

    try:
        outcomes = asyncio.run(score_all())
    except (TimeoutError, asyncio.TimeoutError):
        return {"wall_s": None, "hung": sum(hangs)}
    wall = time.perf_counter() - start
    healthy_ok = all(o.value == 1.0 for o, h in zip(outcomes, hangs) if not h)
    timed_out = sum(o.error == f"timed out after {timeout_s} s" for o, h in zip(outcomes, hangs) if h)
    caller.close()
    return {"wall_s": wall, "hung": sum(hangs), "healthy_ok": healthy_ok, "timed_out": timed_out}


def hang_table(args) -> None:
    limit = f"> {args.limit_s:.0f}"
    print("| main module | hanging | hung calls | floor s | before s | after s | after <= 1.25 x floor + healthy |")
    print("|---|---|---|---|---|---|---|")
    for main in ("light", "heavy"):
        healthy: dict[str, float] = {}
        for label, every in FRACTIONS.items():
            if label not in args.fractions:
                continue
            walls: dict[str, float | None] = {"before": None, "after": None}
            for path in args.paths:
                env = dict(os.environ, GDPO_BENCH_HEAVY_MAIN="1" if main == "heavy" else "0")
                case = [str(v) for v in (path, args.samples, every, args.timeout_s, args.processes, args.limit_s)]
                # the child's own imports are not timed; its case is stopped at --limit-s, then killed at 600 s
                done = subprocess.run(
                    [sys.executable, __file__, "--case", *case], env=env, capture_output=True, text=True, timeout=600
                )
                result = json.loads(done.stdout.strip().splitlines()[-1])
                wrong = result["wall_s"] is not None and not result["healthy_ok"]
                if wrong or result.get("timed_out", result["hung"]) != result["hung"]:
                    raise SystemExit(f"{path}/{main}/{label}: wrong outcomes {result}")
                walls[path] = result["wall_s"]
            if every == 0:
                healthy = {p: w for p, w in walls.items()}
            hung = result["hung"]
            floor = hung * args.timeout_s / args.processes
            target = 1.25 * floor + (healthy.get("after") or 0.0)
            after = walls["after"] if walls["after"] is not None else math.inf
            verdict = f"{after:.1f} <= {target:.1f}: {'yes' if after <= target else 'NO'}"
            shown = {p: (f"{w:.1f}" if w is not None else limit if p in args.paths else "-") for p, w in walls.items()}
            print(f"| {main} | {label} | {hung} | {floor:.1f} | {shown['before']} | {shown['after']} | {verdict} |")
            sys.stdout.flush()


def make_manager(tokenizer, cheap: bool, processes: int):
    from omegaconf import OmegaConf

    from gdpo_verl.components import AGENT_LOOP_MANAGER, AGENT_LOOP_MANAGER_KEY
    from gdpo_verl.manager import MultiRewardManager

    components = [
        {"name": n, "path": "gdpo_verl.demo.rewards", "fn": f"{n}_reward", "cheap": cheap}
        for n in ("format", "correctness", "brevity")
    ]
    gdpo = {"on_error": "raise", "timeout_s": 30, "processes": processes, "components": components}
    config = OmegaConf.create({"reward": {"gdpo": gdpo}})
    OmegaConf.update(config, AGENT_LOOP_MANAGER_KEY, AGENT_LOOP_MANAGER, force_add=True)  # as gdpo_trainer sets it
    return MultiRewardManager(config, tokenizer)


def make_batch(tokenizer, n: int):
    import numpy as np
    import torch
    from verl import DataProto

    responses = [f"<a>{i % 19}</a>" if i % 3 else f"{i % 9}+1= <a>{i % 10}</a>" for i in range(n)]
    rows = [tokenizer(r)["input_ids"] for r in responses]
    t = max(map(len, rows))
    resp = torch.zeros(n, t, dtype=torch.int64)
    attn = torch.zeros(n, 4 + t, dtype=torch.int64)
    for i, r in enumerate(rows):
        resp[i, : len(r)] = torch.tensor(r)
        attn[i, : 4 + len(r)] = 1
    non_tensors = {
        "data_source": np.array(["toy"] * n, dtype=object),
        "reward_model": np.array([{"ground_truth": str(i % 19)} for i in range(n)], dtype=object),
    }
    return DataProto.from_dict(
        tensors={"prompts": torch.zeros(n, 4, dtype=torch.int64), "responses": resp, "attention_mask": attn},
        non_tensors=non_tensors,
    )


def calls_per_second(manager, data) -> float:
    async def score_all():
        return await asyncio.gather(*(manager.run_single(data[i : i + 1]) for i in range(len(data))))

    start = time.perf_counter()
    asyncio.run(score_all())
    return len(data) * len(manager.scorer.calls) / (time.perf_counter() - start)


def throughput(args) -> None:
    from gdpo_verl.demo.tokenizer import build_tokenizer

    tokenizer = build_tokenizer()
    data = make_batch(tokenizer, args.samples)
    managers = {
        "worker host (processes)": make_manager(tokenizer, False, args.processes),
        "cheap (threads)": make_manager(tokenizer, True, 1),
    }
    rates = {mode: [] for mode in managers}
    for round_ in range(args.rounds + 1):
        for mode, manager in managers.items():
            rate = calls_per_second(manager, data)
            rates[mode].append(rate)
            print(f"round {round_}{' (warm-up)' if round_ == 0 else ''}: {mode}: {rate:,.0f} calls/s", flush=True)
    for manager in managers.values():
        manager.scorer.close()
    medians = {mode: statistics.median(r[1:]) for mode, r in rates.items()}
    print(f"\n| path | calls/s per reward worker (median of {args.rounds}) |\n|---|---|")
    for mode, value in medians.items():
        print(f"| {mode} | {value:,.0f} |")
    print(f"\nworker host / cheap: {medians['worker host (processes)'] / medians['cheap (threads)']:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=None, help="2000 (hung calls) or 512 (--throughput)")
    parser.add_argument("--timeout-s", type=float, default=0.25)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--limit-s", type=float, default=150)
    parser.add_argument("--fractions", nargs="+", default=list(FRACTIONS), choices=list(FRACTIONS))
    parser.add_argument("--paths", nargs="+", default=["before", "after"], choices=["before", "after"])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--throughput", action="store_true")
    parser.add_argument("--case", nargs=6, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        path, samples, every, timeout_s, processes, limit_s = args.case
        result = run_case(path, int(samples), int(every), float(timeout_s), int(processes), float(limit_s))
        print(json.dumps(result), flush=True)
        for child in multiprocessing.active_children():  # a stopped case's pebble workers (the host exits on EOF)
            child.kill()
        os._exit(0)  # do not wait for hung workers
    if args.throughput:
        args.samples = args.samples or 512
        throughput(args)
    else:
        args.samples = args.samples or 2000
        hang_table(args)


if __name__ == "__main__":
    main()
