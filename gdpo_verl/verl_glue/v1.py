"""verl's V1 trainer (``trainer.use_v1=true``): every registered ``PPOTrainer`` mode gets :class:`GDPOAdvantageMixin`.

verl 0.9.1's ``PPOTrainer._compute_advantage`` fetches a fixed list of TransferQueue fields, so the per-reward
tensors never reach an estimator. For ``adv_estimator=gdpo`` (and ``gd2po``, ``rvpo``: verl hands the batch only to
an estimator named ``gdpo``, so those call the ``gdpo`` entry, which dispatches on the config) the mixin runs the
same steps with the per-reward fields added to the fetch (the fenced block below mirrors verl's method, pinned in
``gdpo_verl.pins``), and counts one value per agent session (its final output), as verl counts them for GRPO. For
any other estimator with ``algorithm.gdpo_reward_keys`` set (the GRPO baseline) verl's own step runs, then the same
per-reward metrics are computed on the same rows. A mode registered after the wrap is refused at start-up
(``checks.check_trainer_mode``).
"""

from __future__ import annotations

import numpy as np

from gdpo_verl.components import uses_per_reward_tensors
from gdpo_verl.core.contract import ESTIMATOR_NAME, RewardSettings, decode_columns, field_name
from gdpo_verl.core.methods import ESTIMATORS, MethodSettings
from gdpo_verl.verl_glue.batch import record_keys, reward_metrics, session_final_rows
from gdpo_verl.verl_glue.checks import WRAPPED_MARK, check_tensor_fields

#: TransferQueue fields verl 0.9.1's V1 ``_compute_advantage`` fetches (ours adds the per-reward fields)
V1_ADVANTAGE_FIELDS = (
    *("uid", "response_mask", "rm_scores"),
    *("rollout_log_probs", "old_log_probs", "ref_log_prob", "values"),
)


class GDPOAdvantageMixin:
    """Mixed into each V1 ``PPOTrainer`` mode: the per-reward tensors reach ``gdpo``; per-reward metrics logged."""

    def _compute_advantage(self, batch, metrics: dict):
        algorithm = self.config.algorithm
        is_gdpo = str(algorithm.adv_estimator) in ESTIMATORS
        if not is_gdpo and not algorithm.get("gdpo_reward_keys"):
            return super()._compute_advantage(batch, metrics)
        import torch
        import transfer_queue as tq
        from tensordict import TensorDict
        from verl.trainer.ppo.ray_trainer import apply_kl_penalty, compute_advantage
        from verl.trainer.ppo.rollout_corr_helper import compute_rollout_correction_and_add_to_batch
        from verl.workers.utils.padding import response_to_nested

        settings = RewardSettings.from_algorithm(algorithm)
        method = MethodSettings.from_algorithm(algorithm, len(settings.keys)) if is_gdpo else None
        tensor_keys = settings.keys if uses_per_reward_tensors(self.config) else ()
        ours = [*map(field_name, tensor_keys), "extra_fields", "data_source"]  # TQ leaves out fields no row has
        if not is_gdpo:  # the GRPO baseline: verl's own step, then the same metrics on the same rows
            batch = super()._compute_advantage(batch, metrics)
            data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=["uid", *ours])
            data = fetched_batch(data, settings.keys, tensor_keys)
            final, _ = session_final_rows(batch.keys)
            metrics.update(reward_metrics(data.select_idxs(final), settings))
            return batch

        # ---- mirrors verl 0.9.1 verl.trainer.ppo.v1.trainer_base.PPOTrainer._compute_advantage (pinned) ----
        # changes: the per-reward fields are fetched too (`ours`), the fetch becomes a DataProto through
        # fetched_batch, and the estimator sees one row per agent session (between the two "ours" markers)
        data = tq.kv_batch_get(
            keys=batch.keys, partition_id=batch.partition_id, select_fields=[*V1_ADVANTAGE_FIELDS, *ours]
        )
        response_mask = data["response_mask"]
        data = fetched_batch(data, settings.keys, tensor_keys)
        data.batch["token_level_scores"] = data.batch["rm_scores"]
        if algorithm.use_kl_in_reward:
            data, kl_metrics = apply_kl_penalty(data, kl_ctrl=self.kl_ctrl_in_reward, kl_penalty=algorithm.kl_penalty)
            metrics.update(kl_metrics)
        else:
            data.batch["token_level_rewards"] = data.batch["token_level_scores"]
        rollout_corr_config = algorithm.get("rollout_correction", None)
        bypass = rollout_corr_config and rollout_corr_config.get("bypass_mode", False)
        rollout_correction = rollout_corr_config is not None and "rollout_log_probs" in data.batch and not bypass
        if rollout_correction:
            data, is_metrics = compute_rollout_correction_and_add_to_batch(data, rollout_corr_config)
            metrics.update(is_metrics)

        # ---- ours: one value per agent session (verl's GRPO rule): the final outputs form the groups, and each
        # session's advantage is broadcast to its earlier outputs
        final, position = session_final_rows(batch.keys)
        advantage = getattr(compute_advantage, "__wrapped__", compute_advantage)  # verl's, not the legacy wrapper
        kwargs = dict(
            adv_estimator=ESTIMATOR_NAME,  # gd2po, rvpo too: the entry that gets the batch (module docstring)
            gamma=algorithm.gamma,
            lam=algorithm.lam,
            num_repeat=self.config.actor_rollout_ref.rollout.n,
            norm_adv_by_std_in_grpo=algorithm.get("norm_adv_by_std_in_grpo", True),
            config=algorithm,
        )
        if len(final) == len(data):
            data = advantage(data, **kwargs)
            finals = data
        else:
            finals = advantage(data.select_idxs(final), **kwargs)
            first = finals.batch["response_mask"].argmax(dim=1)
            per_session = finals.batch["advantages"][torch.arange(len(finals)), first]
            broadcast = per_session[torch.as_tensor(position)].unsqueeze(-1) * data.batch["response_mask"]
            data.batch["advantages"] = broadcast
            data.batch["returns"] = broadcast
        metrics.update(reward_metrics(finals, settings, method))
        # ---- end of ours

        fields = ["advantages", "returns"]
        if algorithm.use_kl_in_reward:
            fields.append("token_level_rewards")
        if rollout_correction:
            fields.append("response_mask")
            if "rollout_is_weights" in data.batch:
                fields.append("rollout_is_weights")
        output = {f: response_to_nested(data.batch[f], response_mask) for f in fields}
        output = TensorDict(output, batch_size=len(batch))
        return tq.kv_batch_put(keys=batch.keys, partition_id=batch.partition_id, fields=output)
        # ---- end of the mirror of PPOTrainer._compute_advantage ----


def fetched_batch(data, keys, tensor_keys):
    """A TransferQueue fetch -> DataProto: padded tensors; uid, data_source and the records of components ``keys``
    (values and flags, one float column each) as non-tensor columns. The per-reward tensors of ``tensor_keys`` must
    be there."""
    from verl import DataProto

    check_tensor_fields(data.keys(), tensor_keys)
    extra_fields = _as_list(data.pop("extra_fields")) if "extra_fields" in data.keys() else []
    sources = _as_list(data.pop("data_source")) if "data_source" in data.keys() else None
    uids = _as_list(data.pop("uid"))
    proto = DataProto(batch=data.to_padded_tensor())
    proto.non_tensor_batch["uid"] = np.array(uids, dtype=object)
    if extra_fields:
        records = [(f.get("reward_extra_info") if isinstance(f, dict) else None) for f in extra_fields]
        present = set().union(*(r.keys() for r in records if isinstance(r, dict)))
        wanted = [k for k in record_keys(keys) if k in present]
        proto.non_tensor_batch.update(decode_columns(records, wanted))
    if sources is not None:
        proto.non_tensor_batch["data_source"] = np.array(sources, dtype=object)
    return proto


def _as_list(values) -> list:
    return values.tolist() if hasattr(values, "tolist") else list(values)


def wrap_v1_trainers() -> None:
    """Replace every mode in verl's V1 trainer registry by a subclass with :class:`GDPOAdvantageMixin` first."""
    from verl.trainer.ppo.v1 import trainer_base

    for mode, cls in list(trainer_base.TRAINER_REGISTRY.items()):
        if getattr(cls, WRAPPED_MARK, False):
            continue
        wrapped = type(cls.__name__, (GDPOAdvantageMixin, cls), {WRAPPED_MARK: True, "__module__": __name__})
        trainer_base.TRAINER_REGISTRY[mode] = wrapped
