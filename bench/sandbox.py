"""Benchmark: the sandbox's cost per program, the previous implementation (unshare + Landlock) vs today's (bwrap).

Run: .venv/bin/python bench/sandbox.py                        (old = gdpo_verl/rewards/sandbox.py at b155169)
     .venv/bin/python bench/sandbox.py --old-module /path/to/old_sandbox.py --runs 50 --program 'print(1)'
Both modules run the same short program ``--runs`` times each, interleaved (old, new, old, new, ...) after one
warm-up run each (which also probes each module's plan), in this process. Prints the median and the 10th/90th
percentiles of the wall time of one ``run_python`` call, and the ratio new / old of the medians.
Target: new within 1.5x of old.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OLD_COMMIT = "b155169"


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
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--program", default="print(1)")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(REPO))
    from gdpo_verl.rewards import sandbox as new

    old = load_module("gdpo_old_sandbox", old_module_path(args.old_module))
    modules = {"old": old, "new": new}
    for name, module in modules.items():  # warm-up: probes the plan
        assert module.run_python(args.program).ok, name
        print(f"{name}: layers {', '.join(module.plan().layers)}")
    times: dict[str, list[float]] = {name: [] for name in modules}
    for _ in range(args.runs):
        for name, module in modules.items():
            started = time.perf_counter()
            result = module.run_python(args.program)
            times[name].append(time.perf_counter() - started)
            assert result.ok, (name, result)
    for name, values in times.items():
        deciles = statistics.quantiles(values, n=10)
        print(
            f"{name}: median {statistics.median(values) * 1e3:.1f} ms  "
            f"p10 {deciles[0] * 1e3:.1f} ms  p90 {deciles[-1] * 1e3:.1f} ms  ({len(values)} runs of {args.program!r})"
        )
    ratio = statistics.median(times["new"]) / statistics.median(times["old"])
    print(f"ratio new/old (medians): {ratio:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
