"""CPU backend for verl 0.9.1: train with verl's own PPO trainers (V1 and legacy) on a machine without a GPU.

Public API:

* :func:`activate` - switch this process's verl to the CPU platform (idempotent); see
  :mod:`gdpo_verl.cpu.activation` for what it registers and patches.
* :func:`cpu_overrides` - the Hydra overrides of the CPU preset (:mod:`gdpo_verl.cpu.preset`), which also make
  every Ray worker activate the backend; :func:`cpu_runtime_env` is that Ray runtime environment on its own;
  :func:`cpu_config` composes a job with them, sized for the job's ``trainer.nnodes``/``n_gpus_per_node`` and
  ``RAY_ADDRESS``.
* :func:`check_rollout_backend` - fail at start-up, naming the CPU preset, when the configured rollout engine
  (e.g. vLLM) is not installed.

Modules: ``platform``/``device`` (verl platform ``cpu``), ``patches`` (the one monkeypatch, version-pinned),
``hf_rollout`` (``rollout.name=hf``: a ``transformers`` generate server), ``autoload`` (worker hook),
``engine`` (verl's FSDP engines registered for device ``cpu``), ``preset`` (the Hydra overrides),
``backend_check`` (start-up check of the rollout engine). Importing this package imports no verl code.
"""

from gdpo_verl.cpu.activation import DEVICE_ENV_FLAG, activate
from gdpo_verl.cpu.backend_check import check_rollout_backend
from gdpo_verl.cpu.preset import cpu_config, cpu_overrides, cpu_runtime_env

__all__ = ["DEVICE_ENV_FLAG", "activate", "check_rollout_backend", "cpu_config", "cpu_overrides", "cpu_runtime_env"]
