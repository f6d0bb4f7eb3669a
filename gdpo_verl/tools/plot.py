"""Plot per-reward training curves of GDPO and GRPO runs from verl's metrics.jsonl files (PNG, matplotlib Agg).

Run (from the repository root):
    python -m gdpo_verl.tools.plot outputs/2026-01-01/12-00-00 outputs/2026-01-01/12-30-00 -o rewards.png
    python -m gdpo_verl.tools.plot multirun/2026-01-01/12-00-00            # every run below it (Hydra multirun)
    python -m gdpo_verl.tools.plot runA runB --label gdpo --label grpo --smooth 5 --val

A RUN is a directory holding ``metrics.jsonl`` (verl's file logger: one ``{"step": int, "data": {...}}`` per
line), or such a ``.jsonl`` file itself; a directory without one is searched recursively. Its method and seed
come from Hydra's ``RUN/.hydra/config.yaml`` (``algorithm.adv_estimator``, ``seed``; GRPO with
``algorithm.norm_adv_by_std_in_grpo=false`` is labelled ``grpo_nostd``), else from ``--label`` (one per RUN,
in order) or the name (``<method>-seed<N>`` as in the default ``trainer.experiment_name``, else the whole name).

One axes per reward component (``gdpo/<name>/mean``), then the total score (``critic/score/mean``) and the
number of distinct advantages per batch under each run's own method (``gdpo/collapse/distinct_<method>``) when
logged, then with ``--val`` the validation means (``val-core/<source>/reward/mean@n``, the total, and each
reward's ``val-aux/<source>/<name>/mean@n``). Line styles differ per method, so identical curves stay visible;
step ticks are whole numbers. Methods are overlaid, one colour each; several runs
of a method (seeds) are drawn as the median over runs with the inter-quartile band (25th-75th percentile).
``plot_runs(run_dirs, out_png)`` is what ``gdpo_verl.main`` calls after training to write ``rewards.png``.
"""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gdpo_verl.tools.runs import METRICS_FILE, VAL_MEAN, read_series

REWARD_MEAN = re.compile(r"^gdpo/(?P<name>[^/]+)/mean$")
NOT_REWARDS = {"collapse", "source"}  # gdpo/<these>/... are not reward components
SCORE_KEY = "critic/score/mean"
NAME_PATTERN = re.compile(r"^(?P<method>.+?)[-_]seed[-_]?(?P<seed>\d+)$")
METHOD_COLOURS = {"gdpo": "C0", "grpo": "C1", "grpo_nostd": "C2", "gd2po": "C3", "saw": "C4", "rvpo": "C5"}
METHOD_NAMES = {"gdpo": "GDPO", "grpo": "GRPO", "grpo_nostd": "GRPO w/o std", "gd2po": "GD²PO", "saw": "SAW",
                "rvpo": "RVPO"}  # fmt: skip
#: line styles, so identical curves stay visible (GDPO solid, drawn on top; GRPO dashed over it)
METHOD_LINES = {"gdpo": "-", "grpo": "--", "grpo_nostd": ":", "gd2po": "-.", "saw": (0, (1, 3)), "rvpo": "-."}
METHOD_MARKERS = {"gdpo": "^", "grpo": "o", "grpo_nostd": "s", "gd2po": "D", "saw": "x", "rvpo": "v"}


@dataclass
class Run:
    """One training run: where it came from, its method and seed, and its metrics.

    metrics: {metric name: (steps (n,) int64, values (n,) float64)}, steps ascending, null values dropped.
    """

    path: Path
    method: str
    seed: int | None
    metrics: dict[str, tuple[np.ndarray, np.ndarray]]


def find_metric_files(path: str | Path) -> list[Path]:
    """RUN argument -> metrics files: the ``.jsonl`` itself, ``RUN/metrics.jsonl``, or every one below RUN."""
    path = Path(path)
    if path.is_file():
        return [path]
    if (path / METRICS_FILE).is_file():
        return [path / METRICS_FILE]
    if path.is_dir():
        found = sorted(path.rglob(METRICS_FILE))
        if found:
            return found
    raise FileNotFoundError(f"{path}: no {METRICS_FILE} there (give a run directory or a .jsonl file)")


def run_identity(metrics_file: Path, label: str | None = None) -> tuple[str, int | None]:
    """(method, seed) of a run: ``label`` (``method`` or ``method-seedN``), Hydra's saved config, or the name."""
    seed = None
    if label is None:
        run_dir = metrics_file.parent
        config = run_dir / ".hydra" / "config.yaml"
        if config.is_file():
            from omegaconf import OmegaConf

            cfg = OmegaConf.load(config)
            method = OmegaConf.select(cfg, "launch.method", default=None, throw_on_resolution_failure=False)
            if method is None:  # configs from before launch.method: the estimator names the method
                method = OmegaConf.select(
                    cfg, "algorithm.adv_estimator", default=None, throw_on_resolution_failure=False
                )
            raw_seed = OmegaConf.select(cfg, "seed", default=None, throw_on_resolution_failure=False)
            by_std = OmegaConf.select(
                cfg, "algorithm.norm_adv_by_std_in_grpo", default=True, throw_on_resolution_failure=False
            )
            if method is not None:
                method = str(method)
                if method == "grpo" and by_std is False:
                    method = "grpo_nostd"  # recipes/method/grpo_nostd.yaml
                return method, int(raw_seed) if isinstance(raw_seed, int) else None
        label = metrics_file.stem if metrics_file.name != METRICS_FILE else run_dir.resolve().name
    match = NAME_PATTERN.match(label)
    if match:
        return match["method"], int(match["seed"])
    return label, seed


def load_runs(run_dirs: Sequence[str | Path], labels: Sequence[str] | None = None) -> list[Run]:
    """Every RUN argument -> its runs (a directory may hold several). ``labels``: none, or one per RUN."""
    if labels and len(labels) != len(run_dirs):
        raise ValueError(f"give one --label per run ({len(run_dirs)}); got {len(labels)}")
    runs = []
    for i, run_dir in enumerate(run_dirs):
        for metrics_file in find_metric_files(run_dir):
            method, seed = run_identity(metrics_file, labels[i] if labels else None)
            runs.append(Run(metrics_file.parent, method, seed, read_series(metrics_file)))
    return runs


def reward_names(runs: Sequence[Run]) -> list[str]:
    """Reward components logged by any run (``gdpo/<name>/mean``), in first-seen order."""
    names: dict[str, None] = {}
    for run in runs:
        for key in run.metrics:
            match = REWARD_MEAN.match(key)
            if match and match["name"] not in NOT_REWARDS:
                names[match["name"]] = None
    return list(names)


def panels_for(runs: Sequence[Run], include_val: bool = False) -> list[tuple[str, dict[str, str]]]:
    """[(title, {method: metric key})]: the curves each axes shows, per method."""
    methods = list(dict.fromkeys(run.method for run in runs))
    logged = {key for run in runs for key in run.metrics}
    panels = [
        (f"reward: {name} (batch mean)", dict.fromkeys(methods, f"gdpo/{name}/mean")) for name in reward_names(runs)
    ]
    if SCORE_KEY in logged:
        panels.append(("total score (critic/score/mean)", dict.fromkeys(methods, SCORE_KEY)))
    collapse = {m: f"gdpo/collapse/distinct_{m}" for m in methods if f"gdpo/collapse/distinct_{m}" in logged}
    if collapse:
        panels.append(("distinct advantages per batch (own method)", collapse))
    if include_val:
        rewards = set(reward_names(runs))
        for key in sorted(logged):
            match = VAL_MEAN.match(key)
            if match and (key.startswith("val-core/") or match["name"] in rewards):
                what = "total reward" if key.startswith("val-core/") else match["name"]
                panels.append(
                    (f"validation: {what} ({match['source']}, mean@{match['n']})", dict.fromkeys(methods, key))
                )
    return panels


def y_label(title: str) -> str:
    """A short y-axis label per panel kind (a metric key would run into the next panel)."""
    if title.startswith("distinct"):
        return "distinct advantages (rounded to 1e-4)"
    return "validation mean" if title.startswith("validation") else "batch mean"


def band(
    curves: Sequence[tuple[np.ndarray, np.ndarray]], smooth: int = 1
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Runs' curves [(steps (n_i,), values (n_i,))] -> (steps (n,), median (n,), q25 (n,), q75 (n,)).

    Curves are aligned on the union of their steps (a run missing a step does not count there); ``smooth``
    > 1 applies a trailing moving average of that many logged points to each run first.
    """
    steps = np.unique(np.concatenate([s for s, _ in curves]))
    table = np.full((len(curves), steps.size), np.nan)
    for i, (s, v) in enumerate(curves):
        if smooth > 1:
            kernel = np.ones(min(smooth, v.size))
            v = np.convolve(v, kernel, mode="full")[: v.size] / np.convolve(np.ones(v.size), kernel, "full")[: v.size]
        table[i, np.searchsorted(steps, s)] = v
    q25, median, q75 = np.nanquantile(table, [0.25, 0.5, 0.75], axis=0)
    return steps, median, q25, q75


def plot_runs(
    run_dirs: Sequence[str | Path],
    out_png: str | Path,
    *,
    labels: Sequence[str] | None = None,
    smooth: int = 1,
    include_val: bool = False,
    title: str | None = None,
) -> Path:
    """Write the per-reward comparison figure of ``run_dirs`` to ``out_png`` and return its path.

    Raises FileNotFoundError when a RUN has no metrics file and ValueError when nothing plottable was logged.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    runs = load_runs(run_dirs, labels)
    panels = panels_for(runs, include_val)
    if not panels:
        raise ValueError(
            f"nothing to plot in {', '.join(map(str, run_dirs))}: no gdpo/<reward>/mean, {SCORE_KEY} "
            "or gdpo/collapse/distinct_* metrics were logged"
        )
    methods = list(dict.fromkeys(run.method for run in runs))
    methods.sort(key=lambda m: (list(METHOD_COLOURS).index(m) if m in METHOD_COLOURS else len(METHOD_COLOURS), m))
    colours = {m: METHOD_COLOURS.get(m, f"C{3 + i}") for i, m in enumerate(methods)}
    columns = min(3, len(panels))
    rows = math.ceil(len(panels) / columns)
    fig, axes = plt.subplots(rows, columns, figsize=(5.0 * columns, 3.6 * rows), squeeze=False)
    for ax, (panel_title, keys) in zip(axes.flat, panels):
        for method in methods:
            key = keys.get(method)
            curves = [run.metrics[key] for run in runs if run.method == method and key in run.metrics]
            if not curves:
                continue
            steps, median, q25, q75 = band(curves, smooth)
            name = METHOD_NAMES.get(method, method)
            label = f"{name} (median of {len(curves)} runs)" if len(curves) > 1 else name
            marker = "o" if steps.size <= 20 else None  # sparse series (validation) show their points
            ax.plot(steps, median, color=colours[method], label=label, linewidth=1.6, marker=marker, markersize=3,
                    linestyle=METHOD_LINES.get(method, "-."), zorder=3 if method == "gdpo" else 2)  # fmt: skip
            if len(curves) > 1:
                ax.fill_between(steps, q25, q75, color=colours[method], alpha=0.2, linewidth=0)
        ax.set_title(panel_title, fontsize=10)
        ax.set_xlabel("training step")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # steps are whole numbers, also for 2-step runs
        ax.set_ylabel(y_label(panel_title))
        ax.grid(True, alpha=0.3)
        if ax.lines:
            ax.legend(fontsize=8)
    for ax in list(axes.flat)[len(panels) :]:
        ax.set_visible(False)
    seeds = {m: sum(run.method == m for run in runs) for m in methods}
    summary = ", ".join(f"{METHOD_NAMES.get(m, m)}: {n} run{'s' if n > 1 else ''}" for m, n in seeds.items())
    band_note = "; median and IQR band over runs" if any(n > 1 for n in seeds.values()) else ""
    smooth_note = f"; moving average over {smooth} steps" if smooth > 1 else ""
    fig.suptitle(title or f"Training rewards per component ({summary}{band_note}{smooth_note})", fontsize=11)
    fig.tight_layout()
    out = Path(out_png)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m gdpo_verl.tools.plot",
        description="Per-reward training curves of GDPO vs GRPO runs (median and IQR over seeds).",
    )
    parser.add_argument("runs", nargs="+", metavar="RUN_DIR", help="run directory, multirun directory or .jsonl file")
    parser.add_argument("-o", "--output", default="rewards.png", help="output PNG (default rewards.png)")
    parser.add_argument(
        "--label",
        action="append",
        help="label per RUN_DIR, in order: METHOD or METHOD-seedN (overrides the Hydra config and the name)",
    )
    parser.add_argument("--smooth", type=int, default=1, help="moving average over N logged steps (default 1: none)")
    parser.add_argument("--val", action="store_true", help="also plot the validation means: total and per reward")
    parser.add_argument("--title", help="figure title (default: methods and run counts)")
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.output.lower().endswith(".png"):
        parser.error(f"--output {args.output!r}: valid values end in .png")
    if args.smooth < 1:
        parser.error(f"--smooth {args.smooth}: valid values are integers >= 1")
    try:
        out = plot_runs(
            args.runs, args.output, labels=args.label, smooth=args.smooth, include_val=args.val, title=args.title
        )
    except (FileNotFoundError, ValueError) as err:
        parser.error(str(err))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
