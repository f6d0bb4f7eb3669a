"""Benchmark: the ``gdpo`` estimator (ours) vs upstream verl 0.9.1's, against a memory-traffic floor.

Run: .venv/bin/python bench/advantage.py            (add --device cuda on a GPU machine)
Prints one table per run, all figures measured side by side in that run:
  ours      gdpo_verl.estimator.compute_gdpo_advantage on per-reward token tensors (bs, T) x K
  upstream  verl.trainer.ppo.core_algos.compute_gdpo_outcome_advantage (per-key scalars; Python loops)
  floor     one read of each per-reward score tensor plus one write of a fresh (bs, T) float32 output
  extra MiB peak memory above inputs + output during our call, in units of one (bs, T) float32 tensor
Targets: ours within 2x of the floor, >= 25x faster than upstream, extra memory <= 2 (bs, T) float32 tensors.
A second table times every method this project ships through the same estimator entry on the same inputs, the
methods interleaved round by round (median over ``--repeat`` rounds); target: none above 2x GDPO's time.
Only the methods: .venv/bin/python bench/advantage.py --methods-only
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch
from omegaconf import OmegaConf

SHAPES = [(512 * 16, 1024, 16), (128 * 8, 4096, 8)]  # (bs, T, group size), K rewards each
K = 3


def make_inputs(bs: int, t: int, g: int, device: str, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, t + 1, (bs,), generator=gen)
    mask = (torch.arange(t).unsqueeze(0) < lengths.unsqueeze(1)).to(torch.int64)  # verl's dtype
    scores = torch.randint(0, 4, (bs, K), generator=gen).to(torch.float32)
    tensors = {}
    for k in range(K):
        tok = torch.zeros(bs, t)
        tok[torch.arange(bs), lengths - 1] = scores[:, k]
        tensors[f"token_level_scores_r{k}"] = tok.to(device)
    uids = np.array([f"prompt-{i // g}" for i in range(bs)], dtype=object)
    return tensors, mask.to(device), scores, uids


def timeit(fn, device: str, repeat: int) -> float:
    """Median wall time in ms over ``repeat`` runs after one warm-up."""
    fn()
    times = []
    for _ in range(repeat):
        if device == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        if device == "cuda":
            torch.cuda.synchronize()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def peak_extra_tensors(fn, device: str, bs: int, t: int) -> float:
    """Peak memory allocated during ``fn`` beyond its (bs, T) float32 output, in (bs, T) float32 units."""
    unit = bs * t * 4
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        out = fn()
        peak = torch.cuda.max_memory_allocated() - base
    else:
        # torch's profiler records every CPU allocation and free (self_cpu_memory_usage, signed) in order
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            out = fn()
        peak, live = 0, 0
        for event in sorted(prof.events(), key=lambda e: e.time_range.start):
            live += event.self_cpu_memory_usage
            peak = max(peak, live)
    out_bytes = out[0].numel() * out[0].element_size()
    return (peak - out_bytes) / unit


def bench_shape(bs: int, t: int, g: int, device: str, repeat: int, upstream_repeat: int, config) -> list[str]:
    """Time floor, ours and upstream on one shape; return the printed row."""
    from verl.trainer.ppo import core_algos

    from gdpo_verl.estimator import compute_gdpo_advantage

    tensors, mask, scores, uids = make_inputs(bs, t, g, device)
    zeros = torch.zeros(bs, t, device=device)

    def ours():
        return compute_gdpo_advantage(zeros, mask, index=uids, config=config, batch=tensors)

    def floor():
        reads = [tensor.sum(-1) for tensor in tensors.values()]
        out = torch.empty(bs, t, device=device)
        out.fill_(1.0)
        return out, reads

    prompt_len = 4
    upstream_batch = {
        "prompts": torch.zeros(bs, prompt_len, dtype=torch.int64, device=device),
        "attention_mask": torch.cat([torch.ones(bs, prompt_len, dtype=torch.int64, device=device), mask], 1),
    }
    non_tensor = {f"r{k}": scores[:, k].numpy().astype(object) for k in range(K)}

    def upstream():
        return core_algos.compute_gdpo_outcome_advantage(
            zeros, mask, uids, config=config, non_tensor_batch=non_tensor, batch=upstream_batch
        )

    t_floor = timeit(floor, device, repeat)
    t_ours = timeit(ours, device, repeat)
    t_up = timeit(upstream, device, upstream_repeat)
    extra = peak_extra_tensors(ours, device, bs, t)
    assert torch.allclose(ours()[0], upstream()[0], atol=1e-4), "ours and upstream disagree"
    return [
        f"{bs} x {t}",
        f"{t_floor:.2f}",
        f"{t_ours:.2f}",
        f"{t_up:.1f}",
        f"{t_ours / t_floor:.2f}",
        f"{t_up / t_ours:.1f}",
        f"{extra:.2f}",
    ]


#: (label, algorithm options on top of the benchmark's config): every method, GDPO first (the reference)
METHODS = [
    ("gdpo", {}),
    ("gd2po sign", {"adv_estimator": "gd2po", "gd2po_filter": "sign"}),
    ("gd2po snr", {"adv_estimator": "gd2po", "gd2po_filter": "snr", "gd2po_tau": 0.8}),
    ("saw (gdpo)", {"gdpo_reward_weighting": "saw", "gdpo_saw_offsets": [3.0, 0.0, 0.0]}),
    ("rvpo", {"adv_estimator": "rvpo", "rvpo_risk": 1.0}),
]


def bench_methods(bs: int, t: int, g: int, device: str, repeat: int, config) -> list[list[str]]:
    """Time every method of :data:`METHODS` on one shape, round-robin; rows (label, ms, x GDPO)."""
    from gdpo_verl.estimator import compute_gdpo_advantage

    tensors, mask, _, uids = make_inputs(bs, t, g, device)
    zeros = torch.zeros(bs, t, device=device)
    configs = [OmegaConf.merge(config, {"adv_estimator": "gdpo", **extra}) for _, extra in METHODS]
    calls = [(lambda c=c: compute_gdpo_advantage(zeros, mask, index=uids, config=c, batch=tensors)) for c in configs]
    for call in calls:  # warm-up, and every method must give finite advantages
        assert torch.isfinite(call()[0]).all()
    times: list[list[float]] = [[] for _ in calls]
    for _ in range(repeat):
        for i, call in enumerate(calls):
            times[i].append(timeit(call, device, 1))
    medians = [statistics.median(ts) for ts in times]
    return [[label, f"{ms:.1f}", f"{ms / medians[0]:.2f}"] for (label, _), ms in zip(METHODS, medians)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--upstream-repeat", type=int, default=3)
    parser.add_argument("--methods-only", action="store_true", help="only the table of every method")
    args = parser.parse_args()

    import verl  # noqa: F401  (registers our estimator through the plugin entry point)

    config = OmegaConf.create({"gdpo_reward_keys": [f"r{k}" for k in range(K)], "norm_adv_by_std_in_grpo": True})
    print(f"device={args.device} threads={torch.get_num_threads()} K={K} torch={torch.__version__}")
    header = (
        f"{'bs x T':>14} {'floor ms':>9} {'ours ms':>8} {'upstream ms':>12} {'ours/floor':>10} "
        f"{'upstream/ours':>13} {'extra (bs,T) f32':>16}"
    )
    if not args.methods_only:
        print(header)
        for bs, t, g in SHAPES:
            row = bench_shape(bs, t, g, args.device, args.repeat, args.upstream_repeat, config)
            print("".join(f"{v:>{w}}" for v, w in zip(row, (14, 10, 9, 13, 11, 14, 17))))
    print(f"{'bs x T':>14} {'method':>12} {'ms':>8} {'x gdpo':>7}")
    for bs, t, g in SHAPES:
        for label, ms, ratio in bench_methods(bs, t, g, args.device, args.repeat, config):
            print(f"{f'{bs} x {t}':>14} {label:>12} {ms:>8} {ratio:>7}")


if __name__ == "__main__":
    main()
