"""Rollout adapter inside each actor worker: pushes the trained weights to the HF server after every step.

verl's ``ActorRolloutRefWorker`` builds ``get_rollout_class(rollout.name, "async")`` as ``self.rollout``; for
``rollout.name=hf`` that is :class:`HFServerAdapter` (registered in ``verl.workers.rollout.base._ROLLOUT_REGISTRY``
by :func:`gdpo_verl.cpu.activate`). With the ``naive`` checkpoint engine (the default for colocated sync
training) the worker calls :meth:`HFServerAdapter.update_weights` with the full actor parameters under their HF
names; the adapter copies them to host tensors and sends them in buckets of
``rollout.checkpoint_engine.update_weights_bucket_megabytes`` to the replica's server actor,
``hf_server_<replica>_0``. ``resume``/``release`` are no-ops: on CPU there is no device memory to hand back.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

import ray
import torch
from verl.workers.rollout.base import BaseRollout

SERVER_NAME_PREFIX = "hf_server_"


def server_actor_name(replica_rank: int, node_rank: int = 0, kind: str = "", suffix: str = "") -> str:
    """Ray actor name of a replica's server (``kind`` is ``reward_``/``teacher_`` for those replicas)."""
    return f"{SERVER_NAME_PREFIX}{kind}{replica_rank}_{node_rank}{suffix}"


class HFServerAdapter(BaseRollout):
    """Client side of :class:`gdpo_verl.cpu.hf_rollout.server.HFGenerateServer` in the training worker."""

    def __init__(self, config, model_config, device_mesh, replica_rank: int = -1):
        super().__init__(config, model_config, device_mesh)
        rank = int(os.environ["RANK"])
        world = (
            self.config.tensor_model_parallel_size
            * self.config.data_parallel_size
            * self.config.pipeline_model_parallel_size
        )
        self.replica_rank = rank // world if replica_rank == -1 else replica_rank
        self.rollout_rank = rank % world
        self.bucket_bytes = self.config.checkpoint_engine.update_weights_bucket_megabytes << 20
        self._server = None

    @property
    def server(self):
        if self._server is None:
            self._server = ray.get_actor(server_actor_name(self.replica_rank))
        return self._server

    async def resume(self, tags: list[str]):
        return None

    async def release(self):
        return None

    @torch.no_grad()
    async def update_weights(
        self,
        weights: Iterable[tuple[str, torch.Tensor]],
        wire_format: str = "named_tensors",
        global_steps: int | None = None,
        peft_config=None,
        **kwargs,
    ):
        """Send every ``(name, tensor)`` of ``weights`` to the server (all ranks must drain the generator)."""
        if wire_format != "named_tensors":
            raise ValueError(f"HF rollout accepts wire_format='named_tensors' only, got {wire_format!r}")
        if peft_config is not None:
            raise ValueError("HF rollout cannot load LoRA adapters; set actor_rollout_ref.model.lora.merge=True")
        bucket: dict[str, torch.Tensor] = {}
        size = 0
        for name, tensor in weights:  # drained on every rank: FSDP gathers full tensors collectively
            if self.rollout_rank != 0:
                continue
            host = tensor.detach().to("cpu", copy=True)
            bucket[name] = host
            size += host.numel() * host.element_size()
            if size >= self.bucket_bytes:
                await self.server.load_weights.remote(bucket)
                bucket, size = {}, 0
        if self.rollout_rank != 0:
            return
        if bucket:
            await self.server.load_weights.remote(bucket)
        if global_steps is not None:
            await self.server.set_global_steps.remote(global_steps)
