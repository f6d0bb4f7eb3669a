"""The quiet console (gdpo_verl/console.py): settings, step lines, the follower of metrics.jsonl, the final table.

Fast tests on hand-written verl file-logger rows; the slow test runs the demo twice (quiet and
``launch.verbose=true``) and counts the lines a user sees.
Run: .venv/bin/python -m pytest tests/test_console_on_cpu.py -q   (add -m slow for the end-to-end test)
"""

import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from gdpo_verl import console

NAMES = ["format", "correctness"]


def _row(step: int, **data) -> bytes:
    return json.dumps({"step": step, "data": data}).encode() + b"\n"


def _train(step: int, fmt: float, corr: float, seconds: float = 4.5) -> dict:
    return {
        "training/global_step": step,
        "timing_s/step": seconds,
        "gdpo/format/mean": fmt,
        "gdpo/correctness/mean": corr,
        "gdpo/collapse/distinct_gdpo": 40,
    }


def _val(fmt: float, corr: float) -> dict:
    return {
        "val-core/toy/reward/mean@1": fmt + corr,
        "val-aux/gdpo_verl/toy/format/mean@1": fmt,  # a data source with a slash
        "val-aux/toy/correctness/mean@1": corr,
        "val-aux/toy/correctness/mean@4": corr / 2,  # more samples: the larger n wins
        "val-aux/toy/brevity/mean@1": 0.5,  # not a named reward: not shown
    }


def _cfg(**launch):
    return OmegaConf.create(
        {"launch": launch, "trainer": {"logger": ["console"]}, "ray_kwargs": {"ray_init": {"num_cpus": 4}}}
    )


def test_quiet_settings_use_ray_and_verl_switches_and_keep_the_users_values():
    cfg = _cfg()
    console.quiet_settings(cfg)
    ray_init = cfg.ray_kwargs.ray_init
    assert ray_init.log_to_driver is False and ray_init.logging_level == "error"
    assert ray_init.runtime_env.env_vars.VERL_LOGGING_LEVEL == "WARN"
    assert list(cfg.trainer.logger) == ["console", "file"]  # the step lines are read from verl's file logger
    mine = _cfg()
    mine.ray_kwargs.ray_init.log_to_driver = True
    mine.trainer.logger = "file"
    console.quiet_settings(mine)
    assert mine.ray_kwargs.ray_init.log_to_driver is True and mine.trainer.logger == "file"


def test_verbose_leaves_everything_as_verl_has_it():
    cfg = _cfg(verbose=True)
    before = OmegaConf.to_container(cfg)
    console.quiet_settings(cfg)
    assert OmegaConf.to_container(cfg) == before


@pytest.mark.parametrize(
    "argv, verbose",
    [([], False), (["launch.verbose=true"], True), (["++launch.verbose=True"], True), (["launch.verbose=false"], False),
     (["trainer.launch.verbose=true"], False), (["launch.verbose_x=true"], False)],
)  # fmt: skip
def test_verbose_on_the_command_line(argv, verbose):
    assert console.verbose_in_argv(["seed=1", *argv]) is verbose


def test_quiet_imports_set_verl_level_unless_set_and_verbose_yaml_takes_it_back(monkeypatch):
    monkeypatch.delenv("VERL_LOGGING_LEVEL", raising=False)
    monkeypatch.delenv(console.QUIET_IMPORTS_ENV, raising=False)
    console.quiet_imports(["launch.verbose=true"])
    assert "VERL_LOGGING_LEVEL" not in os.environ
    console.quiet_imports([])
    assert os.environ["VERL_LOGGING_LEVEL"] == "ERROR"
    console.quiet_driver(_cfg(verbose=True))  # launch.verbose: true in a YAML file, read after the imports
    assert "VERL_LOGGING_LEVEL" not in os.environ and console.QUIET_IMPORTS_ENV not in os.environ
    monkeypatch.setenv("VERL_LOGGING_LEVEL", "DEBUG")  # the user's own value is never touched
    console.quiet_imports([])
    console.quiet_driver(_cfg(verbose=True))
    assert os.environ["VERL_LOGGING_LEVEL"] == "DEBUG"


@pytest.mark.parametrize("bad", ["yes", 1, None])
def test_verbose_must_be_a_bool(bad):
    with pytest.raises(ValueError, match=r"launch.verbose must be true or false, got"):
        console.is_verbose(_cfg(verbose=bad))


def test_step_and_validation_lines():
    row = {**_train(3, 0.5, 0.25), "step": 3}
    assert console.step_line(row, NAMES, 30) == "step 3/30  4.50 s/step  format 0.500  correctness 0.250"
    missing = {"training/global_step": 1, "step": 1, "gdpo/format/mean": float("nan")}
    assert console.step_line(missing, NAMES, None) == "step 1  - s/step  format -  correctness -"
    val = {**_val(1.0, 0.75), "step": 10}
    assert console.validation_line(val, NAMES) == "validation at step 10  format 1.000  correctness 0.375"
    assert console.validation_line(row, NAMES) is None
    both = {**row, **_val(1.0, 0.5)}
    assert console.row_lines(both, NAMES, 30) == [
        console.step_line(row, NAMES, 30),
        console.validation_line(both, NAMES),
    ]


def test_follower_prints_each_row_once_and_waits_for_complete_lines(tmp_path):
    path = tmp_path / "metrics.jsonl"
    out = io.StringIO()
    with console.MetricsFollower(path, NAMES, total=3, poll_s=0.02, file=out):
        time.sleep(0.1)  # the file does not exist yet
        with open(path, "wb", buffering=0) as f:
            f.write(_row(0, **_val(1.0, 0.0)))
            whole = _row(1, **_train(1, 0.5, 0.25))
            f.write(whole[:20])  # half a line: not read yet
            time.sleep(0.15)
            assert "step 1/3" not in out.getvalue()
            f.write(whole[20:])
            f.write(b"not json\n")  # skipped, not fatal
            f.write(_row(2, **_train(2, 0.75, 0.5)))
            time.sleep(0.15)
            assert "step 2/3" in out.getvalue()
            f.write(_row(3, **_train(3, 1.0, 1.0), **_val(1.0, 1.0)))  # written just before the run ends
    text = out.getvalue()
    lines = [line.strip("\r") for line in text.splitlines() if line.startswith(("step", "validation"))]
    assert lines == [
        "validation at step 0  format 1.000  correctness 0.000",
        "step 1/3  4.50 s/step  format 0.500  correctness 0.250",
        "step 2/3  4.50 s/step  format 0.750  correctness 0.500",
        "step 3/3  4.50 s/step  format 1.000  correctness 1.000",
        "validation at step 3  format 1.000  correctness 0.500",
    ]
    assert "3/3" in text.splitlines()[-1]  # the progress bar's last state


def test_reward_table(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_bytes(
        _row(0, **_val(0.5, 0.0)) + _row(1, **_train(1, 0.5, 0.25)) + _row(2, **_train(2, 0.75, 0.5), **_val(1.0, 1.0))
    )
    assert console.reward_table(path, NAMES).splitlines() == [
        "reward       train step 1  train step 2  val step 0  val step 2",
        "format       0.500         0.750         0.500       1.000",
        "correctness  0.250         0.500         0.000       0.500",
    ]
    assert console.reward_table(tmp_path / "absent.jsonl", ["format"]).splitlines()[1].split() == ["format"] + ["-"] * 4


def test_failure_hint_names_the_log_folder():
    cfg = _cfg()
    hint = console.failure_hint(cfg)
    assert "/tmp/ray/session_latest/logs" in hint and "launch.verbose=true" in hint
    cfg.ray_kwargs.ray_init._temp_dir = "/scratch/ray"
    assert "/scratch/ray/session_latest/logs" in console.failure_hint(cfg)


def test_learning_signal_frac_counts_groups_where_any_component_varies():
    import torch

    from gdpo_verl.core.metrics import step_metrics

    nan = float("nan")
    scores = torch.tensor(
        [[1.0, 0.0], [1.0, 1.0],  # group a: the second component varies -> signal
         [0.0, 1.0], [0.0, 1.0],  # group b: both constant -> none
         [1.0, nan], [0.0, nan],  # group c: the first varies, the second abstains -> signal
         [1.0, 1.0]],             # group d: one response -> not counted
    )  # fmt: skip
    uids = ["a", "a", "b", "b", "c", "c", "d"]
    assert step_metrics(scores, uids, NAMES, [1.0, 1.0])["gdpo/learning_signal_frac"] == pytest.approx(2 / 3)
    flat = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 0.0], [0.0, 0.0]])
    assert step_metrics(flat, ["a", "a", "b", "b"], NAMES, [1.0, 1.0])["gdpo/learning_signal_frac"] == 0.0


def test_no_signal_warning_after_consecutive_silent_steps_once_per_streak(tmp_path):
    path = tmp_path / "metrics.jsonl"
    signals = [0.0, 0.0, 0.5, 0.0, 0.0, 0.0, 0.0, 0.0, 0.2, 0.0, 0.0, 0.0]  # streaks of 2, 5 and 3
    path.write_bytes(b"".join(_row(i + 1, **_train(i + 1, 0.0, 0.0), **{console.SIGNAL_KEY: v})
                              for i, v in enumerate(signals)))  # fmt: skip
    for steps in (True, False):  # quiet console, and launch.verbose=true (warning only)
        out = io.StringIO()
        with console.MetricsFollower(path, NAMES, total=len(signals), poll_s=0.01, file=out, steps=steps):
            pass
        warnings = [line for line in out.getvalue().splitlines() if "WARNING: no learning signal" in line]
        assert [w.split("up to step ")[1].split(")")[0] for w in warnings] == ["6", "12"]
        assert "format 0.000  correctness 0.000" in warnings[0] and "data.max_prompt_length" in warnings[0]
        assert ("step 1/12" in out.getvalue()) is steps


# ------------------------------------------------------------------------------------------ end to end (slow)

QUIET_MAX_LINES = 40  # one screen, plus one line per step


def _demo(tmp_path: Path, *overrides: str) -> subprocess.CompletedProcess:
    tmp_path.mkdir(parents=True)
    env = {**os.environ, "RAY_DEDUP_LOGS": "1"}
    return subprocess.run(
        [sys.executable, "-m", "gdpo_verl.main", "trainer.total_training_steps=2", "trainer.test_freq=2",
         f"launch.output_dir={tmp_path}", *overrides],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=900,
    )  # fmt: skip


@pytest.mark.slow
def test_demo_console_is_quiet_by_default_and_verbose_brings_verl_back(tmp_path):
    quiet = _demo(tmp_path / "quiet")
    text = quiet.stdout + quiet.stderr
    assert quiet.returncode == 0, text[-3000:]
    lines = [line for part in text.splitlines() for line in part.split("\r") if line.strip()]
    steps = [line for line in lines if line.startswith("step ")]
    assert [s.split()[1] for s in steps] == ["1/2", "2/2"], steps
    assert all("format " in s and "correctness " in s and "brevity " in s and "s/step" in s for s in steps)
    assert any(line.startswith("reward ") for line in lines)  # the final table
    assert "target_num_threads" not in text and "Initial validation metrics" not in text
    assert len(text.splitlines()) <= QUIET_MAX_LINES, text
    loud = _demo(tmp_path / "loud", "launch.verbose=true", "trainer.total_training_steps=1")
    text = loud.stdout + loud.stderr
    assert loud.returncode == 0, text[-3000:]
    assert "Initial validation metrics" in text and "Training Progress" in text  # verl's own output
    assert not any(line.startswith("step 1/") for line in text.splitlines())  # not printed twice
