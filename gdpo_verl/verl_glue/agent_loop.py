"""Rollout side of the data path: verl's agent-loop workers, writing one ``token_level_scores_<name>`` per component.

Selected through the hook verl 0.9.1 offers for this in both trainers (``recipes/gdpo_trainer.yaml`` sets it)::

    actor_rollout_ref.rollout.agent.agent_loop_manager_class=gdpo_verl.verl_glue.agent_loop.GDPOAgentLoopManager

:class:`GDPOAgentLoopManager` builds verl's own manager for the trainer in use, with worker subclasses that change
one thing: after verl's reward step (the ``gdpo_multi`` manager's per-sample ``reward_extra_info``), each row gets a
float32 ``token_level_scores_<name>`` per component (layout: ``gdpo_verl.core.token_scores``), and a process
reward's per-token list leaves ``reward_extra_info`` (which keeps one scalar per key for verl's metrics).

  V1 (``trainer.use_v1=true``)   each agent-loop output becomes a TransferQueue row through ``as_dict()``; the fields
                                 sit beside ``rm_scores`` (same length, one value per response token). A session with
                                 several outputs: verl gives every output the final output's reward info; the
                                 trainer counts each session once (``GDPOAdvantageMixin``). A row without
                                 ``data_source`` gets ``"unknown"`` (verl's V1 validation reads that field).
  legacy (``use_v1=false``)      the padded ``DataProto`` of ``_postprocess`` gets them in ``batch`` (bs, T).

Before building workers, :meth:`GDPOAgentLoopManager.create` checks, in the trainer's process, that verl's registries
hold gdpo-verl's estimator and manager and that the V1 trainer mode carries the advantage mixin; each worker checks
the registries in its own process (where the reward managers score). verl internals relied upon are pinned in
``gdpo_verl.pins``.
"""

from __future__ import annotations

import ray
import torch
from pydantic import Field
from verl.experimental.agent_loop.agent_loop import AgentLoopManager, AgentLoopOutput, AgentLoopWorker
from verl.trainer.ppo.v1.agent_loop_tq import AgentLoopManagerTQ, AgentLoopWorkerTQ

from gdpo_verl.components import parse_spec, uses_per_reward_tensors
from gdpo_verl.core.contract import without_token_lists
from gdpo_verl.core.token_scores import token_score_tensors
from gdpo_verl.verl_glue.checks import check_trainer_mode
from gdpo_verl.verl_glue.install import check_registered

UNKNOWN_SOURCE = "unknown"


def component_names(config) -> tuple[str, ...]:
    """The ``reward.gdpo`` component names (empty for other reward managers: nothing to write)."""
    if not uses_per_reward_tensors(config):
        return ()
    return tuple(parse_spec(config.reward.get("gdpo")).names)


class GDPOAgentLoopOutput(AgentLoopOutput):
    """verl's agent-loop output whose row (``as_dict``) carries the per-reward tensors."""

    gdpo_component_names: tuple[str, ...] = Field(default=(), exclude=True)

    @classmethod
    def of(cls, output: AgentLoopOutput, names) -> GDPOAgentLoopOutput:
        if type(output) is not AgentLoopOutput:
            raise TypeError(
                f"gdpo-verl's rollout workers take verl's AgentLoopOutput; this agent loop returned "
                f"{type(output).__module__}.{type(output).__qualname__}, whose extra fields would be lost"
            )
        values = {name: getattr(output, name) for name in AgentLoopOutput.model_fields}
        return cls.model_construct(_fields_set=set(output.model_fields_set), **values, gdpo_component_names=names)

    def as_dict(self) -> dict:
        row = super().as_dict()
        info = row["extra_fields"].get("reward_extra_info")
        if info is None or not self.gdpo_component_names:
            return row
        length = row["responses"].shape[0]
        tensors = token_score_tensors([info], self.gdpo_component_names, torch.tensor([length]), width=length)
        row.update({field: tensor[0] for field, tensor in tensors.items()})
        row["extra_fields"] = {**row["extra_fields"], "reward_extra_info": without_token_lists(info)}
        row.setdefault("data_source", UNKNOWN_SOURCE)  # the sample's own data_source (verl's kwargs) replaces it
        return row


class GDPOAgentLoopWorkerTQ(AgentLoopWorkerTQ.__ray_actor_class__):
    """V1: verl's TransferQueue worker; its outputs become :class:`GDPOAgentLoopOutput` before verl stores them."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        check_registered("an agent-loop worker")
        self.gdpo_component_names = component_names(self.config)

    async def _agent_loop_postprocess(self, output, validate, **kwargs):
        outputs = output if isinstance(output, list) else [output]
        ours = [GDPOAgentLoopOutput.of(o, self.gdpo_component_names) for o in outputs]
        return await super()._agent_loop_postprocess(ours if isinstance(output, list) else ours[0], validate, **kwargs)


class GDPOAgentLoopWorker(AgentLoopWorker):
    """Legacy: verl's worker; the batch it returns carries the per-reward tensors."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        check_registered("an agent-loop worker")
        self.gdpo_component_names = component_names(self.config)

    def _postprocess(self, inputs, input_non_tensor_batch=None, validate=False):
        infos = [i.extra_fields.get("reward_extra_info") for i in inputs]
        scored = bool(self.gdpo_component_names) and all(info is not None for info in infos)
        if scored:
            for item, info in zip(inputs, infos, strict=True):
                item.extra_fields["reward_extra_info"] = without_token_lists(info)
        out = super()._postprocess(inputs, input_non_tensor_batch=input_non_tensor_batch, validate=validate)
        if scored:
            responses = out.batch["responses"]
            lengths = out.batch["attention_mask"][:, out.batch["prompts"].shape[1] :].sum(dim=-1)
            out.batch.update(token_score_tensors(infos, self.gdpo_component_names, lengths, responses.shape[1]))
        return out


class _ManagerTQ(AgentLoopManagerTQ):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.agent_loop_workers_class = ray.remote(GDPOAgentLoopWorkerTQ)


class _ManagerLegacy(AgentLoopManager):
    def __init__(self, *args, **kwargs):
        self.agent_loop_workers_class = ray.remote(GDPOAgentLoopWorker)
        super().__init__(*args, **kwargs)


class GDPOAgentLoopManager:
    """One class name for both trainers: ``create`` builds verl's V1 or legacy manager with gdpo-verl's workers."""

    @classmethod
    def create(cls, *args, config, **kwargs):
        check_registered("the trainer process, creating the rollout workers")
        if config.trainer.get("use_v1", True):
            check_trainer_mode(config)
            return _ManagerTQ.create(*args, config=config, **kwargs)
        return _ManagerLegacy.create(*args, config=config, **kwargs)
