"""What an end-to-end training run proves, read back from its outputs: steps, advantages, weight change, data order.

:func:`summarize` reads verl's file logger (one JSON line per step), the rollout dumps
(``trainer.rollout_data_dir``: one ``<step>.jsonl`` per step, prompts included) and the final HF checkpoint, and
returns a JSON-able dict that the end-to-end tests (tests/test_e2e_on_cpu.py) assert on.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from safetensors.torch import load_file

from gdpo_verl.tools.runs import training_rows

_ADVANTAGE_KEYS = ("critic/advantages/mean", "critic/advantages/max", "critic/advantages/min")


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
    """JSON-able account of a finished run (see the module docstring)."""
    metrics = training_rows(metrics_path)
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
