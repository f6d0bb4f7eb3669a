"""What a CPU smoke run proves, read back from its outputs: steps, advantages, weight change, data order, memory.

:class:`MemorySampler` samples, every half second, the summed resident memory of this process and all its
descendants (the local Ray cluster and its workers run below the driver) and the host's used memory.
:func:`summarize` reads verl's file logger (one JSON line per step), the rollout dumps
(``trainer.rollout_data_dir``: one ``<step>.jsonl`` per step, prompts included) and the final HF checkpoint, and
returns a JSON-able dict that :mod:`gdpo_verl.cpu.smoke` prints and the end-to-end tests assert on.
"""

from __future__ import annotations

import json
import math
import threading
from pathlib import Path

import psutil
from safetensors.torch import load_file

_ADVANTAGE_KEYS = ("critic/advantages/mean", "critic/advantages/max", "critic/advantages/min")


class MemorySampler:
    """Peak summed RSS of the process tree and peak host memory in use, sampled in a daemon thread."""

    def __init__(self, interval_s: float = 0.5):
        self.interval_s = interval_s
        self.peak_tree_rss = 0
        self.peak_host_used = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> None:
        me = psutil.Process()
        total = 0
        for proc in [me, *me.children(recursive=True)]:
            try:
                total += proc.memory_info().rss
            except psutil.Error:
                continue
        self.peak_tree_rss = max(self.peak_tree_rss, total)
        self.peak_host_used = max(self.peak_host_used, psutil.virtual_memory().used)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._sample()

    def __enter__(self) -> MemorySampler:
        self._sample()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def read_metrics(path: Path) -> list[dict]:
    """verl ``FileLogger`` lines as ``[{"step": n, **metrics}]`` (training steps only)."""
    if not path.exists():
        return []
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [{"step": row["step"], **row["data"]} for row in rows if "training/global_step" in row["data"]]


def step_prompts(rollout_dir: Path, step: int) -> list[str]:
    """Sorted prompt texts of one training step, from verl's rollout dump."""
    path = rollout_dir / f"{step}.jsonl"
    if not path.exists():
        return []
    return sorted(json.loads(line)["input"] for line in path.read_text().splitlines() if line.strip())


def max_weight_change(initial_dir: Path, trained_dir: Path) -> float:
    """Largest absolute difference between two HF safetensors checkpoints' shared tensors."""
    initial = {}
    for file in sorted(initial_dir.glob("*.safetensors")):
        initial.update(load_file(file))
    trained = {}
    for file in sorted(trained_dir.glob("*.safetensors")):
        trained.update(load_file(file))
    shared = sorted(set(initial) & set(trained))
    if not shared:
        raise ValueError(f"no common tensors between {initial_dir} and {trained_dir}")
    return max(float((initial[k].float() - trained[k].float()).abs().max()) for k in shared)


def _finite(values) -> bool:
    return all(isinstance(v, int | float) and math.isfinite(v) for v in values)


def summarize(*, metrics_path: Path, rollout_dir: Path, model_dir: Path, ckpt_dir: Path) -> dict:
    """JSON-able account of a finished smoke run (see the module docstring)."""
    metrics = read_metrics(metrics_path)
    steps = [int(m["step"]) for m in metrics]
    advantages = [[m.get(k) for k in _ADVANTAGE_KEYS] for m in metrics]
    last = max(steps) if steps else None
    hf_dir = ckpt_dir / f"global_step_{last}" / "actor" / "huggingface"
    weight_change = max_weight_change(model_dir, hf_dir) if last is not None and hf_dir.exists() else None
    return {
        "steps": steps,
        "advantages_finite": bool(metrics) and all(_finite(a) for a in advantages),
        "advantages": advantages,
        "step_seconds": [m.get("timing_s/step") for m in metrics],
        "rewards_mean": [m.get("critic/rewards/mean") for m in metrics],
        "rollout_actor_probs_diff_max": [m.get("training/rollout_probs_diff_max") for m in metrics],
        "max_weight_change": weight_change,
        "prompts": {str(s): step_prompts(rollout_dir, s) for s in steps},
    }
