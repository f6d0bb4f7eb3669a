"""Benchmark: a CPU demo, GDPO vs GRPO (or any method preset), several seeds: learning, s/step, wall time, memory.

Run: .venv/bin/python bench/demo.py --seeds 0 1 2            (about 2-4 minutes per run on 2 cores)
     .venv/bin/python bench/demo.py --config-name demo_toolcall_scale --rewards format:1 correctness:3 \
         --seeds 0 1 2 3 4 --plot docs/demo_toolcall_scale.png    (a second experiment; reward:max)
     .venv/bin/python bench/demo.py --config-name demo_toolcall_scale --rewards format:1 correctness:3 \
         --methods gdpo gd2po saw rvpo grpo --seeds 0 1 2 3 4 --plot docs/demo_toolcall_methods.png \
         trainer.total_training_steps=20     (every method preset of recipes/method/ on the same seeds)
     .venv/bin/python bench/demo.py --methods gdpo --seeds 0 --variant before=/path/to/old/tree --variant after=.
         (the same runs with each source tree first on PYTHONPATH, alternating, to compare code side by side)
     .venv/bin/python bench/demo.py --methods gdpo --seeds 0 --arm ranks1="trainer.n_gpus_per_node=1" \
         --arm ranks2="trainer.n_gpus_per_node=2"    (the same runs with each arm's extra overrides, alternating)
     .venv/bin/python bench/demo.py --methods gdpo --seeds 0 --rollouts hf vllm
         (the same runs with each CPU rollout engine, launch.rollout=hf|vllm, alternating: HF vs vLLM side by side)
Each run is ``python -m gdpo_verl.main [--config-name C] method=M seed=S``, one after another (seed-major),
into ``--out`` (default bench_out/<config name>). Prints, from the runs' own metrics.jsonl:
  per run     wall s, peak RSS of the process tree (GiB), median s/step (steps 2+), median timing_s/gen as a
              fraction of the step, median s in the advantage step, final validation rewards
  per method  its ratio to GDPO of those timings (measured side by side in this invocation)
  learning    per reward: mean over the first 3 steps, mean over the last 5, and the first step whose 3-step
              moving average reaches the target (start + 50% of the way to the reward's max); median over seeds,
              with 95% bootstrap intervals over seeds (10000 resamples) of the mean final value and steps-to-target
              (a seed that never reaches it counts as steps+1: a censored, optimistic value)
  collapse    median over steps of gdpo/collapse/distinct_<m> for every method m (distinct advantages per batch,
              every method counted on each run's own batches)
and writes the per-reward curves of all runs (median and IQR band over seeds) to --plot (docs/learning.png).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import psutil

from gdpo_verl.core.methods import METHOD_NAMES
from gdpo_verl.tools.runs import training_rows

REWARDS = ("format", "correctness", "brevity")


def run_tree_peak_rss(cmd: list[str], log: Path, env: dict | None = None) -> tuple[int, float, float]:
    """Run ``cmd``; return (exit code, wall seconds, peak summed RSS of its process tree in GiB)."""
    peak = 0
    with open(log, "w") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env)
        start = time.monotonic()
        done = threading.Event()

        def sample():
            nonlocal peak
            while not done.is_set():
                try:
                    root = psutil.Process(proc.pid)
                    rss = sum(p.memory_info().rss for p in [root, *root.children(recursive=True)])
                    peak = max(peak, rss)
                except psutil.Error:
                    pass
                done.wait(0.5)

        thread = threading.Thread(target=sample, daemon=True)
        thread.start()
        code = proc.wait()
        done.set()
        thread.join()
    return code, time.monotonic() - start, peak / 2**30


def learning(steps: list[dict], name: str, top: float = 1.0) -> tuple[float, float, int | None]:
    values = [s[f"gdpo/{name}/mean"] for s in steps]
    start, end = statistics.mean(values[:3]), statistics.mean(values[-5:])
    target = start + 0.5 * (top - start)
    moving = [statistics.mean(values[max(0, i - 2) : i + 1]) for i in range(len(values))]
    reached = next((steps[i]["step"] for i, v in enumerate(moving) if i >= 2 and v >= target), None)
    return start, end, reached


def bootstrap_ci(values, resamples: int = 10000, seed: int = 0) -> tuple[float, float]:
    """95% percentile bootstrap interval of the mean of ``values`` (resampled with replacement)."""
    x = np.asarray(values, dtype=float)
    idx = np.random.default_rng(seed).integers(0, len(x), size=(resamples, len(x)))
    lo, hi = np.percentile(x[idx].mean(axis=1), [2.5, 97.5])
    return float(lo), float(hi)


def parse_rewards(specs: list[str]) -> dict[str, float]:
    """``name[:max]`` -> {name: max} (max defaults to 1.0)."""
    out = {}
    for spec in specs:
        name, _, top = spec.partition(":")
        out[name] = float(top) if top else 1.0
    return out


def parse_variants(
    specs: list[str], arms: list[str] = (), rollouts: list[str] | None = None
) -> dict[str, tuple[Path | None, list[str]]]:
    """``--variant NAME=SOURCE_DIR`` -> {name: (dir, [])}, ``--arm NAME=OVERRIDES`` -> {name: (None, overrides)},
    each of ``--rollouts`` -> {"rollout-R": (None, ["launch.rollout=R"])}; none given: one unnamed variant running
    the current environment."""
    arms = [*arms, *(f"rollout-{r}=launch.rollout={r}" for r in rollouts or ())]
    if not specs and not arms:
        return {"": (None, [])}
    out = {}
    for spec in specs:
        name, sep, src = spec.partition("=")
        if not sep or not name or not Path(src, "gdpo_verl").is_dir():
            raise SystemExit(f"--variant {spec!r}: expected NAME=SOURCE_DIR with SOURCE_DIR/gdpo_verl present")
        out[name] = (Path(src).resolve(), [])
    for spec in arms:
        name, sep, overrides = spec.partition("=")
        if not sep or not name or name in out or not overrides.split():
            raise SystemExit(f'--arm {spec!r}: expected NAME="override ..." with a NAME not used twice')
        out[name] = (None, overrides.split())
    return out


def final_validation(out: Path, names) -> dict[str, float]:
    """The last logged ``val-core/.../<name>/mean@1``-style validation value per reward (empty when none)."""
    from gdpo_verl.tools.runs import read_rows

    last = {}
    for row in read_rows(out / "metrics.jsonl"):
        for key, value in row.items():
            if key.startswith("val") and key.endswith("/mean@1"):
                for name in names:
                    if f"/{name}/" in key:
                        last[name] = value
    return last


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--methods", nargs="+", default=["gdpo", "grpo"], choices=METHOD_NAMES, help="method= presets")
    parser.add_argument("--config-name", default="demo", help="recipe to run (gdpo_verl.main --config-name)")
    parser.add_argument("--rewards", nargs="+", default=list(REWARDS), help="reward[:max] names to report")
    parser.add_argument("--variant", action="append", default=[], help="NAME=SOURCE_DIR (repeatable)")
    parser.add_argument("--arm", action="append", default=[], help='NAME="OVERRIDES" for that arm (repeatable)')
    parser.add_argument(
        "--rollouts", nargs="+", default=[], choices=["hf", "vllm"], help="CPU rollout engines to compare"
    )
    parser.add_argument("--repeats", type=int, default=1, help="runs per (variant, method, seed), alternating")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--plot", type=Path, default=Path("docs/learning.png"))
    parser.add_argument("overrides", nargs="*", help="extra Hydra overrides for every run")
    args = parser.parse_args()
    rewards = parse_rewards(args.rewards)
    variants = parse_variants(args.variant, args.arm, args.rollouts)
    args.out = args.out or Path("bench_out") / args.config_name
    first = next(iter(rewards))

    runs = {}
    for seed in args.seeds:
        for rep in range(args.repeats):
            for method in args.methods:
                for variant, (src, arm_overrides) in variants.items():
                    tag = "-".join(
                        x for x in (variant, method, f"seed{seed}", f"r{rep}" if args.repeats > 1 else "") if x
                    )
                    out = (args.out / tag).resolve()
                    out.mkdir(parents=True, exist_ok=True)
                    env = dict(os.environ)
                    if src is not None:
                        env["PYTHONPATH"] = os.pathsep.join([str(src), *filter(None, [env.get("PYTHONPATH")])])
                    cmd = [sys.executable, "-m", "gdpo_verl.main", "--config-name", args.config_name,
                           f"method={method}", f"seed={seed}", f"launch.output_dir={out}",
                           *args.overrides, *arm_overrides]  # fmt: skip
                    print(f"[bench] {tag} -> {out}", file=sys.stderr, flush=True)
                    code, wall, peak = run_tree_peak_rss(cmd, out / "run.log", env)
                    if code != 0:
                        raise SystemExit(f"{tag} failed (exit {code}); see {out / 'run.log'}")
                    steps = [s for s in training_rows(out / "metrics.jsonl") if f"gdpo/{first}/mean" in s]
                    r = runs[(variant, method, seed, rep)] = {
                        "dir": out,
                        "wall": wall,
                        "peak": peak,
                        "step_s": statistics.median(s["timing_s/step"] for s in steps[1:]),
                        "gen_s": statistics.median(s["timing_s/gen"] for s in steps[1:]),
                        "gen_frac": statistics.median(s["timing_s/gen"] / s["timing_s/step"] for s in steps[1:]),
                        "adv_s": statistics.median(s["timing_s/adv"] for s in steps[1:]),
                        "steps": steps,
                        "val": final_validation(out, rewards),
                    }
                    val = " ".join(f"{k}={v:.3f}" for k, v in r["val"].items())
                    print(
                        f"{tag}: wall {wall:.0f} s, peak RSS {peak:.2f} GiB, {r['step_s']:.2f} s/step, gen "
                        f"{r['gen_frac']:.0%} of a step, advantage step {r['adv_s'] * 1e3:.1f} ms, {len(steps)} steps, "
                        f"final validation: {val or 'none'}",
                        flush=True,
                    )
    if len(variants) > 1:
        print(
            "\n| variant | method | wall s (median) | peak RSS GiB (max) | s/step (median) | timing_s/gen (median) "
            "| gen / step (median) | final validation |"
        )
        print("|---|---|---|---|---|---|---|---|")
        for variant in variants:
            for method in args.methods:
                rs = [r for (v, m, _, _), r in runs.items() if v == variant and m == method]
                val = {k: statistics.median(r["val"][k] for r in rs if k in r["val"]) for k in rs[0]["val"]}
                print(
                    f"| {variant} | {method} | {statistics.median(r['wall'] for r in rs):.0f} | "
                    f"{max(r['peak'] for r in rs):.2f} | {statistics.median(r['step_s'] for r in rs):.2f} | "
                    f"{statistics.median(r['gen_s'] for r in rs):.2f} | "
                    f"{statistics.median(r['gen_frac'] for r in rs):.0%} | "
                    + " ".join(f"{k} {v:.3f}" for k, v in val.items())
                    + " |"
                )
        names = list(variants)
        for method in args.methods:
            a, b = ([r["wall"] for (v, m, _, _), r in runs.items() if v == n and m == method] for n in names[:2])
            print(f"{method}: wall {names[1]}/{names[0]} = {statistics.median(b) / statistics.median(a):.3f}")
    if len(variants) > 1:
        print("\n| variant | method | reward | first 3 steps | last 5 steps | step reaching the half-way target |")
        print("|---|---|---|---|---|---|")
        for (variant, method, seed, rep), r in runs.items():
            for name, top in rewards.items():
                start, end, reached = learning(r["steps"], name, top)
                print(f"| {variant} | {method} seed {seed} r{rep} | {name} | {start:.3f} | {end:.3f} | {reached} |")
    variant = next(iter(variants))  # the tables below: the first variant, first repeat
    runs = {(m, s): r for (v, m, s, rep), r in runs.items() if v == variant and rep == 0}

    print("\n| method | wall s (median) | peak RSS GiB (max) | s/step (median) | advantage ms (median) |")
    print("|---|---|---|---|---|")
    summary = {}
    for method in args.methods:
        rs = [runs[(method, s)] for s in args.seeds]
        summary[method] = {k: statistics.median(r[k] for r in rs) for k in ("wall", "step_s", "adv_s")}
        peak = max(r["peak"] for r in rs)
        m = summary[method]
        print(f"| {method} | {m['wall']:.0f} | {peak:.2f} | {m['step_s']:.2f} | {m['adv_s'] * 1e3:.1f} |")
    if "gdpo" in summary:
        g = summary["gdpo"]
        for method, b in summary.items():
            if method != "gdpo":
                print(f"{method}/gdpo: s/step {b['step_s'] / g['step_s']:.3f}, "
                      f"advantage step {b['adv_s'] / g['adv_s']:.3f}")  # fmt: skip

    print(
        "\n| method | reward | first 3 steps | last 5 steps [95% CI of the mean] | "
        "step reaching start+50% of the way to max (median) [95% CI of the mean, censored at steps+1] |"
    )
    print("|---|---|---|---|---|")
    for method in args.methods:
        for name, top in rewards.items():
            steps_list = [runs[(method, s)]["steps"] for s in args.seeds]
            rows = [learning(st, name, top) for st in steps_list]
            reached = [r[2] for r in rows]
            hit = sorted(x for x in reached if x is not None)
            censored = [x if x is not None else len(st) + 1 for x, st in zip(reached, steps_list, strict=True)]
            when = f"{statistics.median(hit):.0f} ({len(hit)}/{len(rows)} seeds)" if hit else f"never (0/{len(rows)})"
            end_lo, end_hi = bootstrap_ci([r[1] for r in rows])
            hit_lo, hit_hi = bootstrap_ci(censored)
            print(
                f"| {method} | {name} | {statistics.median(r[0] for r in rows):.3f} | "
                f"{statistics.median(r[1] for r in rows):.3f} [{end_lo:.3f}, {end_hi:.3f}] | "
                f"{when} [{hit_lo:.1f}, {hit_hi:.1f}] |"
            )

    logged = {key for r in runs.values() for s in r["steps"] for key in s}
    counted = [m for m in METHOD_NAMES if f"gdpo/collapse/distinct_{m}" in logged]
    print("\ndistinct advantages per batch (median over steps and seeds), every method counted on the same batches")
    print("| run's method | " + " | ".join(f"under {m}" for m in counted) + " |")
    print("|---|" + "---|" * len(counted))
    for method in args.methods:
        steps = [s for seed in args.seeds for s in runs[(method, seed)]["steps"]]
        keys = [f"gdpo/collapse/distinct_{m}" for m in counted]
        cells = [[s[key] for s in steps if key in s] for key in keys]
        print(f"| {method} | " + " | ".join(f"{statistics.median(c):.0f}" if c else "-" for c in cells) + " |")

    from gdpo_verl.tools.plot import plot_runs

    args.plot.parent.mkdir(parents=True, exist_ok=True)
    png = plot_runs([runs[(m, s)]["dir"] for m in args.methods for s in args.seeds], args.plot,
                    labels=[f"{m}-seed{s}" for m in args.methods for s in args.seeds], smooth=3)  # fmt: skip
    print(f"\nplot: {png}")


if __name__ == "__main__":
    main()
