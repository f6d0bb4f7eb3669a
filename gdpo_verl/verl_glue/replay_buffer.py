"""GDPO's V1 replay buffer: verl's sampler with a configurable poll interval and a group filter that sees every reward.

Selected through the hook verl 0.9.1's V1 trainer offers for this (``trainer.v1.sampler.custom_sampler``); verl
then passes only its base constructor arguments plus ``trainer.v1.sampler.sampler_kwargs``, so everything else this
sampler needs travels in ``sampler_kwargs``, interpolated from the rest of the config (``recipes/gdpo_trainer.yaml``
selects the sampler and carries the block):

    sampler_kwargs key          default   meaning
    poll_interval               2.0       seconds between TransferQueue polls while waiting for rollouts (verl: 2.0;
                                          the CPU preset uses 0.05)
    group_filter                metric    which rule algorithm.filter_groups (DAPO, off unless .enable=true) uses:
                                          metric: verl's own filter on algorithm.filter_groups.metric;
                                          any_component: keep a group when ANY GDPO component varies in it
                                          (:mod:`gdpo_verl.core.group_filter`; algorithm.gdpo_reward_keys, with
                                          gdpo_reward_conditions applied; .metric is not used)
    algorithm                   ${algorithm}
    train_batch_size            ${data.train_batch_size}
    gen_batch_size              ${oc.select:data.gen_batch_size,null}
    sync_refill_failed_groups   ${trainer.v1.sampler.sync_refill_failed_groups}

With ``group_filter=any_component`` the step metrics count the groups classified since the previous step under
``gdpo/filter/<reason>`` (kept_total_varies, kept_any_component, dropped_all_constant, kept_singleton); verl's own
``training/filter_groups/*`` counters keep working. Trainer modes: ``sync`` gets :class:`GDPOReplayBuffer`, every
other mode :class:`GDPOReplayBufferAsync` (the one class name in the config picks the right one), mirroring verl.

verl internals relied upon (the constructor contract, the polling loop's use of ``poll_interval``, the filter hook
``_dapo_filtered_keys`` and its callers) are pinned in ``gdpo_verl.pins``. Use it on any machine:
    python -m gdpo_verl.main algorithm.filter_groups.enable=true \
        trainer.v1.sampler.sampler_kwargs.group_filter=any_component
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import torch
from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer, ReplayBufferAsync

from gdpo_verl.core.choices import check_choice
from gdpo_verl.core.contract import RewardSettings, decode_scores, split_row_keys
from gdpo_verl.core.group_filter import REASONS, classify_groups

GROUP_FILTERS = ("metric", "any_component")
DEFAULT_POLL_INTERVAL = 2.0  # verl's
ANY_COMPONENT_METRIC = "<any gdpo reward component>"  # stands in for verl's one metric name
METRIC_PREFIX = "gdpo/filter/"
SAMPLER_KEY = "trainer.v1.sampler"


def _record(value) -> dict | None:
    fields = getattr(value, "data", value)
    info = fields.get("reward_extra_info") if isinstance(fields, dict) else None
    return info if isinstance(info, dict) else None


def component_scores(extra_fields: list, keys) -> torch.Tensor:
    """(N, K) float64 from each trajectory's ``reward_extra_info``; a value missing or None in a sample is NaN.

    Raises when a component is absent from every trajectory: a misnamed key would otherwise drop every group.
    """
    records = [_record(f) for f in extra_fields]
    present = set().union(*(r.keys() for r in records if r is not None))
    absent = [k for k in keys if k not in present]
    if records and absent:
        raise RuntimeError(
            f"group_filter=any_component: components {absent} are in no trajectory's reward_extra_info "
            f"(present: {sorted(present)}); check algorithm.gdpo_reward_keys against the reward manager's output"
        )
    return decode_scores(records, keys)


class GDPOReplayBuffer(ReplayBuffer):
    """verl's sync ``ReplayBuffer`` with ``sampler_kwargs`` (see the module docstring); async modes get the subclass."""

    def __new__(cls, *args, **kwargs):
        mode = kwargs.get("trainer_mode", args[0] if args else "sync")
        if cls is GDPOReplayBuffer and mode != "sync":
            cls = GDPOReplayBufferAsync
        return super().__new__(cls)

    def __init__(self, trainer_mode, trainer_config, max_off_policy_threshold, max_off_policy_strategy,
                 sampler_kwargs, refill_fn=None, **verl_kwargs):  # fmt: skip
        kw = dict(sampler_kwargs or {})
        poll = kw.get("poll_interval")
        poll = DEFAULT_POLL_INTERVAL if poll is None else float(poll)
        if not (math.isfinite(poll) and poll > 0):
            raise ValueError(f"{SAMPLER_KEY}.sampler_kwargs.poll_interval={poll} must be a positive number of seconds")
        self.group_filter = check_choice(
            f"{SAMPLER_KEY}.sampler_kwargs.group_filter", str(kw.get("group_filter", "metric")), GROUP_FILTERS
        )
        algorithm = kw.get("algorithm") or {}
        filter_groups = algorithm.get("filter_groups") or {}
        metric = None
        if filter_groups.get("enable", False):
            if self.group_filter == "any_component":
                self.filter_settings = RewardSettings.from_algorithm(algorithm)
                metric = ANY_COMPONENT_METRIC
            else:
                metric = filter_groups.get("metric")
                if not metric:
                    raise ValueError("algorithm.filter_groups.metric must be set when group filtering is enabled")
                metric = str(metric)
        refill_failed = bool(kw.get("sync_refill_failed_groups", False))
        extra = dict(filter_groups_metric=metric, sync_refill_failed_groups=refill_failed)
        if not isinstance(self, ReplayBufferAsync):  # what verl's _build_replay_buffer passes its sync sampler
            train_batch_size = kw.get("train_batch_size")
            extra.update(
                train_batch_size=train_batch_size,
                gen_batch_size=1
                if metric is not None or refill_failed
                else (kw.get("gen_batch_size") or train_batch_size),
                max_inflight_gen_batches=filter_groups.get("max_inflight_gen_batches", 1) if metric else 1,
            )
        extra.update(verl_kwargs)
        super().__init__(trainer_mode, trainer_config, max_off_policy_threshold, max_off_policy_strategy,
                         sampler_kwargs, poll_interval=poll, refill_fn=refill_fn, **extra)  # fmt: skip
        self._filter_counts: Counter = Counter()
        print(
            f"[gdpo-verl] replay buffer {type(self).__name__} ({__file__}): poll every {poll} s, "
            f"group filter {metric or 'off'} ({self.group_filter})",
            flush=True,
        )

    def _dapo_filtered_keys(self, partition_id: str) -> tuple[set[str], Counter]:
        """verl's contract (filtered uids, {shared value: group count}), with the any-component rule when selected."""
        if self.group_filter != "any_component":
            return super()._dapo_filtered_keys(partition_id)
        if partition_id == "val" or self.filter_groups_metric is None:
            return set(), Counter()
        import transfer_queue as tq

        finished_uids = self.finished_keys[partition_id]
        cache = self._dapo_classification_cache[partition_id]
        for uid in cache.keys() - finished_uids:
            del cache[uid]
        new_uids = finished_uids - cache.keys()
        all_keys = np.asarray(list(self.partitions[partition_id]), dtype=object)
        uid_of = split_row_keys(all_keys.tolist())[0]
        new = np.isin(uid_of, list(new_uids))
        keys, row_uids = all_keys[new].tolist(), uid_of[new]
        missing = new_uids - set(row_uids.tolist())
        if missing:
            raise RuntimeError(f"Finished groups without trajectories: {sorted(missing)[:5]}")
        if keys:
            data = tq.kv_batch_get(keys=keys, partition_id=partition_id, select_fields=["extra_fields"])
            settings = self.filter_settings
            scores = settings.gate(component_scores(list(data["extra_fields"]), settings.keys))
            verdict = classify_groups(scores, row_uids, settings.weights)
            cache.update(zip(verdict.uids, np.where(verdict.keep, None, verdict.total).tolist(), strict=True))
            self._filter_counts.update({REASONS[i]: int(c) for i, c in enumerate(np.bincount(verdict.reason))})
        dropped = {uid: value for uid, value in cache.items() if value is not None}
        return set(dropped), Counter(dropped.values())

    def take_filter_metrics(self) -> dict[str, int]:
        """``gdpo/filter/<reason>`` counts since the last call (all reasons, zeros included), then reset."""
        out = {METRIC_PREFIX + r: int(self._filter_counts.get(r, 0)) for r in REASONS}
        self._filter_counts.clear()
        return out

    def sample(self, global_steps: int, partition_id: str, batch_size: int):
        batch, metrics = super().sample(global_steps, partition_id, batch_size)
        if self.group_filter == "any_component" and partition_id != "val":
            metrics.update(self.take_filter_metrics())
        return batch, metrics


class GDPOReplayBufferAsync(GDPOReplayBuffer, ReplayBufferAsync):
    """The same for verl's async trainer modes (``ReplayBufferAsync``'s sampling, this module's filter)."""
