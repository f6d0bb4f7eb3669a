"""Reward calls per second per reward worker: killable process-pool calls vs ``cheap`` (thread) calls, side by side.

Run: ``python bench/reward_calls.py [--samples 512] [--rounds 5] [--processes 2]``

One ``MultiRewardManager`` per mode scores the same batch of demo responses with the demo's three toy rewards
(microseconds each, so the figure is the cost of the call path itself), all samples concurrently as verl's
reward loop does. Modes alternate round by round; each round's calls/s is printed, then the medians and the ratio.
``cheap`` is the thread path (the manager's only path before killable calls existed). The first process-pool
round includes starting the pool's worker processes; it is reported but left out of the median.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from omegaconf import OmegaConf

from gdpo_verl.demo.tokenizer import build_tokenizer
from gdpo_verl.manager import MultiRewardManager


def make_manager(tokenizer, cheap: bool, processes: int) -> MultiRewardManager:
    components = [
        {"name": n, "path": "gdpo_verl.demo.rewards", "fn": f"{n}_reward", "cheap": cheap}
        for n in ("format", "correctness", "brevity")
    ]
    gdpo = {"on_error": "raise", "timeout_s": 30, "processes": processes, "components": components}
    return MultiRewardManager(OmegaConf.create({"reward": {"gdpo": gdpo}}), tokenizer)


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


def calls_per_second(manager: MultiRewardManager, data) -> float:
    async def score_all():
        return await asyncio.gather(*(manager.run_single(data[i : i + 1]) for i in range(len(data))))

    start = time.perf_counter()
    asyncio.run(score_all())
    return len(data) * len(manager.scorer.calls) / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=512)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--processes", type=int, default=2)
    args = parser.parse_args()
    tokenizer = build_tokenizer()
    data = make_batch(tokenizer, args.samples)
    managers = {
        "process pool": make_manager(tokenizer, False, args.processes),
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
    print(f"\nprocess pool / cheap: {medians['process pool'] / medians['cheap (threads)']:.2f}")


if __name__ == "__main__":
    main()
