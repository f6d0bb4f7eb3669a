"""Tests of the training-curve plot (gdpo_verl/tools/plot.py) on small synthetic verl file-logger runs.

Run: .venv/bin/python -m pytest tests/test_plot_on_cpu.py
"""

import json

import numpy as np
import pytest

from gdpo_verl.tools.plot import band, load_runs, main, panels_for, plot_runs, reward_names
from gdpo_verl.tools.runs import read_series as read_metrics

PNG = b"\x89PNG\r\n\x1a\n"


def write_run(
    root, name, method=None, seed=None, steps=8, offset=0.0, val=True, grpo_std=None, config=True, extra=None
):
    """A run directory like gdpo_verl.main writes: metrics.jsonl (+ .hydra/config.yaml when ``config``)."""
    run = root / name
    run.mkdir(parents=True)
    if config and method is not None:
        (run / ".hydra").mkdir()
        lines = [f"seed: {seed}", "algorithm:", f"  adv_estimator: {method}"]
        if grpo_std is not None:
            lines.append(f"  norm_adv_by_std_in_grpo: {str(grpo_std).lower()}")
        lines.append("trainer:\n  experiment_name: ${algorithm.adv_estimator}-seed${seed}")
        (run / ".hydra" / "config.yaml").write_text("\n".join(lines) + "\n")
    with open(run / "metrics.jsonl", "w") as f:
        for step in range(1, steps + 1):
            data = {
                "gdpo/format/mean": min(1.0, 0.3 + 0.08 * step + offset),
                "gdpo/format/std": 0.2,
                "gdpo/correctness/mean": -2.0 + 0.3 * step + offset,
                "gdpo/correctness/contribution": 0.5,
                "gdpo/collapse/distinct_gdpo": 40.0 + step,
                "gdpo/collapse/distinct_grpo": 20.0 + step,
                "gdpo/source/toy/format/mean": 0.5,
                "critic/score/mean": -1.0 + 0.4 * step + offset,
                "timing_s/step": 2.5,
                "training/note": "text is skipped",
            }
            if val and step % 4 == 0:
                data["val-core/toy/acc/mean@1"] = 0.1 * step
                data["val-aux/toy/format/mean@1"] = 0.05 * step  # per reward
                data["val-aux/toy/gdpo_error_format/mean@1"] = 0.0  # not a reward: no panel
            data.update(extra or {})
            f.write(json.dumps({"step": step, "data": data}) + "\n")
    return run


@pytest.fixture
def seeded_runs(tmp_path):
    """Three seeds each of GDPO and GRPO, as separate run directories with Hydra configs."""
    runs = []
    for method in ("gdpo", "grpo"):
        for seed in range(3):
            offset = 0.05 * seed + (0.1 if method == "gdpo" else 0.0)
            runs.append(write_run(tmp_path / "runs", f"{method}_{seed}", method, seed, offset=offset))
    return runs


def test_plot_runs_with_seeds_writes_png(seeded_runs, tmp_path):
    out = plot_runs(seeded_runs, tmp_path / "plots" / "rewards.png", include_val=True)
    assert out == tmp_path / "plots" / "rewards.png"
    data = out.read_bytes()
    assert data[:8] == PNG and len(data) > 10_000


def test_identity_from_hydra_config_name_and_label(tmp_path):
    a = write_run(tmp_path, "2026-01-01_a", "gdpo", 7)
    b = write_run(tmp_path, "grpo-seed3", config=False)
    c = write_run(tmp_path, "unnamed", config=False)
    d = write_run(tmp_path, "nostd", "grpo", 1, grpo_std=False)
    runs = load_runs([a, b, c, d])
    assert [(r.method, r.seed) for r in runs] == [("gdpo", 7), ("grpo", 3), ("unnamed", None), ("grpo_nostd", 1)]
    # configs written now carry launch.method (the method group's name; ${algorithm.adv_estimator} by default)
    e = write_run(tmp_path, "e", "grpo", 2)  # the name alone says grpo_nostd
    f = write_run(tmp_path, "f", "grpo", 5)
    for run, method in ((e, "grpo_nostd"), (f, "${algorithm.adv_estimator}")):
        config = run / ".hydra" / "config.yaml"
        config.write_text(config.read_text() + f"launch:\n  method: {method}\n")
    assert [(r.method, r.seed) for r in load_runs([e, f])] == [("grpo_nostd", 2), ("grpo", 5)]
    relabelled = load_runs([a, c], labels=["baseline-seed2", "gdpo"])
    assert [(r.method, r.seed) for r in relabelled] == [("baseline", 2), ("gdpo", None)]
    with pytest.raises(ValueError, match="one --label per run"):
        load_runs([a, c], labels=["x"])


def test_multirun_directory_and_jsonl_file(tmp_path):
    for i, method in enumerate(["gdpo", "grpo", "gdpo", "grpo"]):
        write_run(tmp_path / "multirun", str(i), method, i // 2)
    runs = load_runs([tmp_path / "multirun"])
    assert sorted((r.method, r.seed) for r in runs) == [("gdpo", 0), ("gdpo", 1), ("grpo", 0), ("grpo", 1)]
    # verl's default file-logger name is <experiment_name>.jsonl = <method>-seed<N>.jsonl
    loose = tmp_path / "gdpo-seed4.jsonl"
    loose.write_text((tmp_path / "multirun" / "0" / "metrics.jsonl").read_text())
    assert [(r.method, r.seed) for r in load_runs([loose])] == [("gdpo", 4)]
    with pytest.raises(FileNotFoundError, match="no metrics.jsonl"):
        load_runs([tmp_path / "missing"])


def test_read_metrics_skips_null_and_text_and_keeps_last_value(tmp_path):
    path = tmp_path / "metrics.jsonl"
    lines = [
        {"step": 2, "data": {"a": 1.0, "b": None, "c": "x", "d": True}},
        {"step": 1, "data": {"a": 0.5}},
        {"step": 2, "data": {"a": 3.0}},  # a resumed run logs step 2 again
    ]
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n\n")
    metrics = read_metrics(path)
    assert list(metrics) == ["a"]
    steps, values = metrics["a"]
    assert steps.tolist() == [1, 2] and values.tolist() == [0.5, 3.0]
    path.write_text('{"data": {}}\n')
    with pytest.raises(ValueError, match="metrics.jsonl:1: not a verl file-logger line"):
        read_metrics(path)


def test_band_median_and_iqr():
    # Three runs at steps 1..3, one missing step 3. At step 1: values 0, 1, 2 -> median 1, q25 0.5, q75 1.5
    # (linear interpolation). At step 3 only runs 0 and 1 count: 2 and 4 -> median 3, q25 2.5, q75 3.5.
    curves = [
        (np.array([1, 2, 3]), np.array([0.0, 1.0, 2.0])),
        (np.array([1, 2, 3]), np.array([1.0, 2.0, 4.0])),
        (np.array([1, 2]), np.array([2.0, 3.0])),
    ]
    steps, median, q25, q75 = band(curves)
    assert steps.tolist() == [1, 2, 3]
    assert median.tolist() == [1.0, 2.0, 3.0]
    assert q25.tolist() == [0.5, 1.5, 2.5] and q75.tolist() == [1.5, 2.5, 3.5]
    # smooth=2: trailing mean of two logged points; the first point averages itself only.
    _, smoothed, _, _ = band(curves[:1], smooth=2)
    assert smoothed.tolist() == [0.0, 0.5, 1.5]


def test_panels(seeded_runs):
    runs = load_runs(seeded_runs)
    assert reward_names(runs) == ["format", "correctness"]  # not "collapse", not "source"
    titles = [title for title, _ in panels_for(runs, include_val=True)]
    assert titles == [
        "reward: format (batch mean)",
        "reward: correctness (batch mean)",
        "total score (critic/score/mean)",
        "distinct advantages per batch (own method)",
        "validation: format (toy, mean@1)",
        "validation: total reward (toy, mean@1)",
    ]
    collapse = dict(panels_for(runs))["distinct advantages per batch (own method)"]
    assert collapse == {"gdpo": "gdpo/collapse/distinct_gdpo", "grpo": "gdpo/collapse/distinct_grpo"}


def test_single_run_and_nothing_to_plot(tmp_path):
    one = write_run(tmp_path, "only", "gdpo", 0, val=False)
    assert plot_runs([one], tmp_path / "one.png").stat().st_size > 5_000
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "metrics.jsonl").write_text(json.dumps({"step": 1, "data": {"timing_s/step": 1.0}}) + "\n")
    with pytest.raises(ValueError, match="nothing to plot"):
        plot_runs([empty], tmp_path / "empty.png")


def test_cli(seeded_runs, tmp_path, capsys):
    out = tmp_path / "cli.png"
    main([*map(str, seeded_runs[:4]), "-o", str(out), "--smooth", "3", "--title", "toy"])
    assert out.read_bytes()[:8] == PNG
    assert f"wrote {out}" in capsys.readouterr().out
    for argv, message in [
        ([str(seeded_runs[0]), "-o", "x.svg"], "valid values end in .png"),
        ([str(seeded_runs[0]), "--smooth", "0"], "valid values are integers >= 1"),
        ([str(tmp_path / "nope")], "no metrics.jsonl"),
    ]:
        with pytest.raises(SystemExit):
            main(argv)
        assert message in capsys.readouterr().err


def test_plot_style_integer_steps_short_labels_and_visible_identical_curves(tmp_path, monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    runs = [write_run(tmp_path, f"{m}_0", m, 0, steps=2) for m in ("gdpo", "grpo")]  # identical curves, two steps
    figures = []
    real_close = plt.close
    monkeypatch.setattr(plt, "close", figures.append)  # keep the figure to inspect it
    plot_runs(runs, tmp_path / "two.png", include_val=True)
    (fig,) = figures
    axes = [ax for ax in fig.axes if ax.get_visible()]
    for ax in axes:
        ticks = [t for t in ax.get_xticks() if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]]
        assert all(float(t).is_integer() for t in ticks), ticks
        assert len(ax.get_ylabel()) <= 40
    styles = {line.get_label(): (line.get_linestyle(), line.get_zorder()) for line in axes[0].lines}
    assert styles == {"GDPO": ("-", 3), "GRPO": ("--", 2)}
    real_close(fig)
