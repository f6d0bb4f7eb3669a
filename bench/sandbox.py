"""Benchmark: the code sandbox's cost per program, one jail per test (the previous design) vs one jail per program.

Run: .venv/bin/python bench/sandbox.py                   (old = gdpo_verl/rewards/sandbox.py at 3796fed)
     .venv/bin/python bench/sandbox.py --old-module /path/to/old_sandbox.py --repeats 10 --cpu 0
Both modules run the same program (``print(1)`` by default) on programs of 1, 16 and 64 tests, interleaved
(old, new, old, new, ...) after one warm-up run each (which also probes each module's plan), in this process,
pinned with every jail to ONE core (``--cpu``). Prints, per design and program size, the median and the
10th/90th percentiles of the wall time of one ``run_tests`` call, tests per second per core, and the cost of
each additional test ((median of 64 tests - median of 16 tests) / 48).
Target: 16 trivial tests in at most 200 ms, each additional test at most 10 ms.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OLD_COMMIT = "3796fed"
SIZES = (1, 16, 64)


def load_module(name: str, path: Path):
    """Import a module from a file path (the old sandbox is stdlib-only and self-contained)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def old_module_path(given: Path | None) -> Path:
    if given is not None:
        return given
    text = subprocess.run(
        ["git", "-C", str(REPO), "show", f"{OLD_COMMIT}:gdpo_verl/rewards/sandbox.py"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    path = Path(tempfile.mkdtemp(prefix="gdpo-bench-")) / "old_sandbox.py"
    path.write_text(text)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old-module", type=Path, help=f"old sandbox.py (default: from git {OLD_COMMIT})")
    parser.add_argument("--repeats", type=int, default=10, help="runs of each program size per design")
    parser.add_argument("--program", default="print(1)")
    parser.add_argument("--cpu", type=int, default=0, help="the one core everything runs on")
    args = parser.parse_args(argv)
    os.sched_setaffinity(0, {args.cpu})  # inherited by every jail this process starts
    sys.path.insert(0, str(REPO))
    from gdpo_verl.rewards import sandbox as new

    old = load_module("gdpo_old_sandbox", old_module_path(args.old_module))
    modules = {"old": old, "new": new}
    for name, module in modules.items():  # warm-up: probes the plan
        assert module.run_python(args.program).ok, name
        print(f"{name}: layers {', '.join(module.plan().layers)}")
    times = {(name, size): [] for name in modules for size in SIZES}
    for _ in range(args.repeats):
        for size in SIZES:
            for name, module in modules.items():
                started = time.perf_counter()
                results = module.run_tests(args.program, [""] * size)
                times[name, size].append(time.perf_counter() - started)
                assert all(r.ok for r in results), (name, size, results[0])
    print(f"program {args.program!r}, {args.repeats} runs per design and size, one core (cpu {args.cpu})")
    for name in modules:
        for size in SIZES:
            values = times[name, size]
            median, deciles = statistics.median(values), statistics.quantiles(values, n=10)
            print(
                f"{name}: {size:2d} tests  median {median * 1e3:7.1f} ms  p10 {deciles[0] * 1e3:7.1f} ms  "
                f"p90 {deciles[-1] * 1e3:7.1f} ms  {size / median:6.1f} tests/s/core"
            )
        extra = (statistics.median(times[name, 64]) - statistics.median(times[name, 16])) / 48
        print(f"{name}: each additional test {extra * 1e3:.1f} ms")
    for size in SIZES:
        ratio = statistics.median(times["old", size]) / statistics.median(times["new", size])
        print(f"{size:2d} tests: old/new (medians) {ratio:.1f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
