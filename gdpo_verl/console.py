"""The training console: quiet by default, everything with ``launch.verbose=true``.

By default ``python -m gdpo_verl.main`` shows a progress bar, one line per training step (seconds per step and
the per-reward batch means ``gdpo/<name>/mean``), one line per validation, and a final per-reward table. It
touches no verl or Ray source; it uses their own switches:

* Ray's ``ray.init(log_to_driver=False)`` (``ray_kwargs.ray_init.log_to_driver``): the output of every Ray
  worker (verl's TaskRunner and trainer, the rollout, reward and TransferQueue workers: per-worker warnings,
  verl's console logger, its pretty-printed validation dicts) stays in Ray's session log files
  (``/tmp/ray/session_latest/logs`` unless ``ray_init._temp_dir`` says otherwise) instead of the terminal;
  ``ray_init.logging_level=error`` keeps Ray's own start-up notes out of the driver's console;
* ``VERL_LOGGING_LEVEL=WARN`` in the workers' environment (verl's own variable) trims those log files;
* the driver follows verl's file logger (``metrics.jsonl``, ``trainer.logger`` keeps ``file``) as it grows and
  prints the step lines itself (:class:`MetricsFollower`), so nothing is parsed from worker output.

After :data:`NO_SIGNAL_STEPS` consecutive steps in which no reward varies inside any group
(``gdpo/learning_signal_frac == 0``: every advantage is 0), a loud warning names the likely causes, in both modes.

An error still reaches the console: the TaskRunner's exception comes back through ``ray.get`` with its traceback,
and :func:`failure_hint` names the log folder. ``launch.verbose=true`` leaves Ray's and verl's settings as they
are (every worker's output in the terminal, verl's console logger), and the step lines are not printed twice.

Use: ``quiet_settings(cfg)`` before Ray starts, then ``with MetricsFollower(path, names, total): run_ppo(...)``,
then ``print(reward_table(path, names))``.
"""

from __future__ import annotations

import math
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

from omegaconf import DictConfig, OmegaConf, open_dict

from gdpo_verl.tools.runs import TRAINING_STEP_KEY, VAL_MEAN, parse_row, read_rows

QUIET_WORKER_ENV = {"VERL_LOGGING_LEVEL": "WARN"}
QUIET_IMPORTS_ENV = "GDPO_VERL_QUIET_IMPORTS"  # marks a VERL_LOGGING_LEVEL that quiet_imports set
SIGNAL_KEY = "gdpo/learning_signal_frac"
NO_SIGNAL_STEPS = 3  # consecutive training steps without any varying component before the warning
STEP_TIME_KEY = "timing_s/step"


def is_verbose(cfg: DictConfig) -> bool:
    """``launch.verbose`` (default false)."""
    value = cfg.launch.get("verbose", False)
    if not isinstance(value, bool):
        raise ValueError(f"launch.verbose must be true or false, got {value!r}")
    return value


#: the driver's own start-up warnings that say nothing to a user (verl's optional engines, the critic note)
DRIVER_WARNINGS = (r".* engine is not available", r"Disabled critic as algorithm.adv_estimator")


def verbose_in_argv(argv: Sequence[str]) -> bool:
    """``launch.verbose=true`` among command-line overrides (``+``/``++`` prefixes and any case of true)."""
    return any(a.lstrip("+").partition("=")[::2] == ("launch.verbose", "true") for a in (x.lower() for x in argv))


def quiet_imports(argv: Sequence[str]) -> None:
    """Before Hydra composes the config (which imports verl: ``pkg://verl.trainer.config``), unless
    ``launch.verbose=true`` is on the command line: verl's loggers at ERROR in the driver (``VERL_LOGGING_LEVEL``,
    unless set) and Python warnings filters for :data:`DRIVER_WARNINGS`. (``launch.verbose: true`` in a YAML file
    is read only after these imports: it restores everything else.)"""
    if verbose_in_argv(argv):
        return
    import os
    import warnings

    if "VERL_LOGGING_LEVEL" not in os.environ:
        os.environ["VERL_LOGGING_LEVEL"] = "ERROR"
        os.environ[QUIET_IMPORTS_ENV] = "1"  # set here, so quiet_driver takes it back under launch.verbose=true
    for message in DRIVER_WARNINGS:
        warnings.filterwarnings("ignore", message=message, category=UserWarning)


def quiet_driver(cfg: DictConfig) -> None:
    """Unless ``launch.verbose``: the root logger at WARNING in the driver (Hydra's job logging sets INFO).
    With ``launch.verbose: true`` from a YAML file: the ``VERL_LOGGING_LEVEL`` that :func:`quiet_imports` set is
    removed again, so Ray workers (which inherit the driver's environment) log as verl's defaults say."""
    import os

    if is_verbose(cfg):
        if os.environ.pop(QUIET_IMPORTS_ENV, None):
            os.environ.pop("VERL_LOGGING_LEVEL", None)
        return
    import logging

    logging.getLogger().setLevel(logging.WARNING)


def quiet_settings(cfg: DictConfig) -> None:
    """Unless ``launch.verbose``: worker output to Ray's log files, Ray's driver notes at ERROR, verl's
    loggers at WARN in every worker, and verl's file logger on (the console's step lines are read from it).

    Values the config already sets for these keys are kept (the user's choice wins)."""
    if is_verbose(cfg):
        return
    with open_dict(cfg):
        ray_init = cfg.ray_kwargs.ray_init
        for key, value in {"log_to_driver": False, "logging_level": "error"}.items():
            if ray_init.get(key) is None:
                ray_init[key] = value
        for key, value in QUIET_WORKER_ENV.items():  # DictConfig.setdefault returns the default, not the node
            if OmegaConf.select(ray_init, f"runtime_env.env_vars.{key}") is None:
                OmegaConf.update(ray_init, f"runtime_env.env_vars.{key}", value, force_add=True)
        loggers = cfg.trainer.logger
        loggers = [loggers] if isinstance(loggers, str) else list(loggers or [])
        if "file" not in loggers:
            cfg.trainer.logger = [*loggers, "file"]


def _mean_of(row: dict, key: str) -> float | None:
    value = row.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _val_means(row: dict, names: Sequence[str]) -> dict[str, float]:
    """``{name: value}`` from a row's ``val-{core,aux}/<source>/<name>/mean@<n>`` (verl's validation metrics):
    the largest n (all samples), the first data source that has it."""
    found: dict[str, tuple[int, float]] = {}
    for key in row:
        match = VAL_MEAN.match(key)
        value = _mean_of(row, key) if match and match["name"] in names else None
        if value is not None and int(match["n"]) > found.get(match["name"], (0, 0.0))[0]:
            found[match["name"]] = (int(match["n"]), value)
    return {name: value for name, (_, value) in found.items()}


def _pairs(means: dict[str, float | None], names: Sequence[str]) -> str:
    return "  ".join(f"{n} {means[n]:.3f}" if means.get(n) is not None else f"{n} -" for n in names)


def step_line(row: dict, names: Sequence[str], total: int | None) -> str:
    """One training row -> ``step 3/30  4.81 s/step  format 0.531  correctness 0.250``."""
    step = row["step"]
    seconds = _mean_of(row, STEP_TIME_KEY)
    timing = f"{seconds:.2f} s/step" if seconds is not None else "- s/step"
    of = f"/{total}" if total else ""
    return f"step {step}{of}  {timing}  {_pairs({n: _mean_of(row, f'gdpo/{n}/mean') for n in names}, names)}"


def validation_line(row: dict, names: Sequence[str]) -> str | None:
    """A row carrying validation means -> ``validation at step 10  format 1.000 ...``; None when it has none."""
    means = _val_means(row, names)
    if not means:
        return None
    return f"validation at step {row['step']}  {_pairs(means, names)}"


def row_lines(row: dict, names: Sequence[str], total: int | None) -> list[str]:
    """The console lines of one metrics row (a training step, a validation, or both)."""
    lines = [step_line(row, names, total)] if TRAINING_STEP_KEY in row else []
    val = validation_line(row, names)
    return [*lines, val] if val else lines


def no_signal_warning(steps: int, row: dict, names: Sequence[str]) -> str:
    """The loud line printed when ``steps`` consecutive steps had no varying component in any group."""
    means = _pairs({n: _mean_of(row, f"gdpo/{n}/mean") for n in names}, names)
    return (
        f"[gdpo-verl] WARNING: no learning signal for {steps} consecutive steps (up to step {row['step']}): every "
        f"reward is constant inside every group ({SIGNAL_KEY}=0), so every advantage is 0 and the policy does not "
        f"change. Batch means: {means}. Likely causes: the rewards are all equal (look at a few scored responses: "
        "trainer.rollout_data_dir=DIR); prompts or responses cut (data.max_prompt_length, data.max_response_length; "
        "launch.dry_run=true shows the prompt lengths); a model too small or untrained for the task's format"
    )


class MetricsFollower:
    """Follows verl's ``metrics.jsonl`` while training runs; prints each new row's lines above a progress bar.

    A context manager: a background thread polls the file every ``poll_s`` seconds and reads only complete lines
    (verl writes each row with one unbuffered write); leaving the block stops it and prints what is left.
    ``steps=False`` (``launch.verbose=true``: verl prints its own lines) keeps only the no-signal warning: after
    :data:`NO_SIGNAL_STEPS` consecutive training steps with ``gdpo/learning_signal_frac == 0``, once per streak.
    """

    def __init__(
        self, path: str | Path, names: Sequence[str], total: int | None, poll_s: float = 0.5, file=None, steps=True
    ):
        self.path, self.names, self.total, self.poll_s, self.steps = Path(path), list(names), total, poll_s, steps
        self.file = file if file is not None else sys.stderr
        self._offset = 0
        self._silent_steps = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="gdpo-metrics-follower", daemon=True)
        self._bar = None

    def __enter__(self) -> MetricsFollower:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self._drain()
        if self._bar is not None:
            self._bar.close()

    def _step_done(self) -> None:
        """Advance the progress bar, drawn from the first step on (not over Ray's and verl's start-up lines)."""
        if not self.steps:
            return
        if self._bar is None:
            from tqdm import tqdm

            self._bar = tqdm(total=self.total, desc="training", unit="step", file=self.file, dynamic_ncols=True)
        self._bar.update(1)

    def _write(self, text: str) -> None:
        if self._bar is not None:
            self._bar.write(text, file=self.file)
        else:
            print(text, file=self.file, flush=True)

    def _watch_signal(self, row: dict) -> None:
        signal = _mean_of(row, SIGNAL_KEY)
        if signal is None:
            return
        self._silent_steps = self._silent_steps + 1 if signal == 0.0 else 0
        if self._silent_steps == NO_SIGNAL_STEPS:
            self._write(no_signal_warning(NO_SIGNAL_STEPS, row, self.names))

    def _loop(self) -> None:
        while not self._stop.wait(self.poll_s):
            self._drain()

    def _drain(self) -> None:
        if not self.path.is_file():
            return
        with open(self.path, "rb") as f:
            f.seek(self._offset)
            chunk = f.read()
        complete = chunk[: chunk.rfind(b"\n") + 1]
        self._offset += len(complete)
        for line in complete.splitlines():
            try:
                row = parse_row(line)
            except ValueError:
                continue  # not a verl file-logger row: skipped here; tools.runs names it when the run is read back
            if self.steps:
                for text in row_lines(row, self.names, self.total):
                    self._write(text)
            if TRAINING_STEP_KEY in row:
                self._step_done()
                self._watch_signal(row)


def reward_table(path: str | Path, names: Sequence[str]) -> str:
    """Per reward: the batch mean at the first and the last training step, and the first and last validation.

    Columns: reward | train first | train last | val first | val last (``-`` where nothing was logged)."""
    rows = read_rows(path) if Path(path).is_file() else []
    train = [r for r in rows if TRAINING_STEP_KEY in r]
    vals = [(r["step"], _val_means(r, names)) for r in rows]
    vals = [(s, m) for s, m in vals if m]

    def fmt(value: float | None) -> str:
        return f"{value:.3f}" if value is not None else "-"

    header = ["reward", "train first", "train last", "val first", "val last"]
    if train:
        header[1:3] = [f"train step {train[0]['step']}", f"train step {train[-1]['step']}"]
    if vals:
        header[3:5] = [f"val step {vals[0][0]}", f"val step {vals[-1][0]}"]
    body = [
        [
            n,
            fmt(_mean_of(train[0], f"gdpo/{n}/mean") if train else None),
            fmt(_mean_of(train[-1], f"gdpo/{n}/mean") if train else None),
            fmt(vals[0][1].get(n) if vals else None),
            fmt(vals[-1][1].get(n) if vals else None),
        ]
        for n in names
    ]
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in [header, *body])


def failure_hint(cfg: DictConfig) -> str:
    """The line printed when a quiet run fails: where the workers' output went and how to see it here."""
    temp_dir = cfg.ray_kwargs.ray_init.get("_temp_dir") or "/tmp/ray"
    return (
        f"[gdpo-verl] the run failed; the workers' output is in {temp_dir}/session_latest/logs (Ray's session "
        "logs); rerun with launch.verbose=true to see it in the terminal"
    )
