"""Benchmark: the CPU demo, GDPO vs GRPO, several seeds: learning, seconds per step, wall time, peak memory.

Run: .venv/bin/python bench/demo.py --seeds 0 1 2            (about 3-4 minutes per run on 2 cores)
Each run is ``python -m gdpo_verl.main algorithm.adv_estimator=M seed=S`` (the embedded demo), one after another,
into ``--out`` (default bench_out/demo). Prints, from the runs' own metrics.jsonl:
  per run     wall s, peak RSS of the process tree (GiB), median s/step (steps 2+), median s in the advantage step
  per method  GDPO/GRPO ratios of those timings (measured side by side in this invocation)
  learning    per reward: mean over the first 3 steps, mean over the last 5, and the first step whose 3-step
              moving average reaches the target (start + 50% of the way to 1.0); median over seeds
and writes the per-reward curves of all runs (median and IQR band over seeds) to docs/learning.png.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil

from gdpo_verl.tools.runs import training_rows

REWARDS = ("format", "correctness", "brevity")


def run_tree_peak_rss(cmd: list[str], log: Path) -> tuple[int, float, float]:
    """Run ``cmd``; return (exit code, wall seconds, peak summed RSS of its process tree in GiB)."""
    peak = 0
    with open(log, "w") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT)
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


def learning(steps: list[dict], name: str) -> tuple[float, float, int | None]:
    values = [s[f"gdpo/{name}/mean"] for s in steps]
    start, end = statistics.mean(values[:3]), statistics.mean(values[-5:])
    target = start + 0.5 * (1.0 - start)
    moving = [statistics.mean(values[max(0, i - 2) : i + 1]) for i in range(len(values))]
    reached = next((steps[i]["step"] for i, v in enumerate(moving) if i >= 2 and v >= target), None)
    return start, end, reached


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--methods", nargs="+", default=["gdpo", "grpo"], choices=["gdpo", "grpo"])
    parser.add_argument("--out", type=Path, default=Path("bench_out/demo"))
    parser.add_argument("--plot", type=Path, default=Path("docs/learning.png"))
    parser.add_argument("overrides", nargs="*", help="extra Hydra overrides for every run")
    args = parser.parse_args()

    runs = {}
    for seed in args.seeds:
        for method in args.methods:
            out = (args.out / f"{method}-seed{seed}").resolve()
            out.mkdir(parents=True, exist_ok=True)
            cmd = [sys.executable, "-m", "gdpo_verl.main", f"algorithm.adv_estimator={method}", f"seed={seed}",
                   f"launch.output_dir={out}", *args.overrides]  # fmt: skip
            print(f"[bench] {method} seed={seed} -> {out}", file=sys.stderr, flush=True)
            code, wall, peak = run_tree_peak_rss(cmd, out / "run.log")
            if code != 0:
                raise SystemExit(f"{method} seed={seed} failed (exit {code}); see {out / 'run.log'}")
            steps = [s for s in training_rows(out / "metrics.jsonl") if "gdpo/format/mean" in s]
            runs[(method, seed)] = {
                "wall": wall,
                "peak": peak,
                "step_s": statistics.median(s["timing_s/step"] for s in steps[1:]),
                "adv_s": statistics.median(s["timing_s/adv"] for s in steps[1:]),
                "steps": steps,
            }
            r = runs[(method, seed)]
            print(
                f"{method} seed={seed}: wall {wall:.0f} s, peak RSS {peak:.2f} GiB, {r['step_s']:.2f} s/step, "
                f"advantage step {r['adv_s'] * 1e3:.1f} ms, {len(steps)} steps",
                flush=True,
            )

    print("\n| method | wall s (median) | peak RSS GiB (max) | s/step (median) | advantage ms (median) |")
    print("|---|---|---|---|---|")
    summary = {}
    for method in args.methods:
        rs = [runs[(method, s)] for s in args.seeds]
        summary[method] = {k: statistics.median(r[k] for r in rs) for k in ("wall", "step_s", "adv_s")}
        peak = max(r["peak"] for r in rs)
        m = summary[method]
        print(f"| {method} | {m['wall']:.0f} | {peak:.2f} | {m['step_s']:.2f} | {m['adv_s'] * 1e3:.1f} |")
    if {"gdpo", "grpo"} <= set(summary):
        g, b = summary["gdpo"], summary["grpo"]
        print(f"\nGDPO/GRPO: s/step {g['step_s'] / b['step_s']:.3f}, advantage step {g['adv_s'] / b['adv_s']:.3f}")

    print("\n| method | reward | first 3 steps | last 5 steps | step reaching start+50% of the way to 1 |")
    print("|---|---|---|---|---|")
    for method in args.methods:
        for name in REWARDS:
            rows = [learning(runs[(method, s)]["steps"], name) for s in args.seeds]
            reached = [r[2] for r in rows]
            hit = sorted(x for x in reached if x is not None)
            when = f"{statistics.median(hit):.0f} ({len(hit)}/{len(rows)} seeds)" if hit else f"never (0/{len(rows)})"
            print(
                f"| {method} | {name} | {statistics.median(r[0] for r in rows):.3f} | "
                f"{statistics.median(r[1] for r in rows):.3f} | {when} |"
            )

    from gdpo_verl.tools.plot import plot_runs

    args.plot.parent.mkdir(parents=True, exist_ok=True)
    png = plot_runs([args.out / f"{m}-seed{s}" for m in args.methods for s in args.seeds], args.plot,
                    labels=[f"{m}-seed{s}" for m in args.methods for s in args.seeds], smooth=3)  # fmt: skip
    print(f"\nplot: {png}")


if __name__ == "__main__":
    main()
