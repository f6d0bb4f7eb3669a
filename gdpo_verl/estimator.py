"""verl adapter: the ``gdpo`` advantage estimator, registered in verl's estimator registry.

Registered by ``import verl`` in every process (``verl.plugins`` entry point -> ``gdpo_verl.plugin`` ->
``gdpo_verl.verl_glue``), in place of upstream's ``compute_gdpo_outcome_advantage``. verl's trainers call it through
``verl.trainer.ppo.ray_trainer.compute_advantage(data, "gdpo", config=algorithm_config)``.

Config (under ``algorithm``; verl's AlgoConfig declares the first two):
    gdpo_reward_keys:       [format, correctness, ...]   component names (required)
    gdpo_reward_weights:    [1.0, 1.0, ...]              weights after normalization (default 1)
    gdpo_reward_conditions: {length: {on: correctness, threshold: 1.0}}   paper Eq. 8 (default none)
    gdpo_final_norm:        token | sequence | none      (default token: verl's masked_whiten)
    gdpo_backend:           fast | verl                  (verl: literal per-reward compute_grpo_outcome_advantage)
    gdpo_epsilon:           1e-6
    gdpo_kl:                dropped | after_norm | component   (use_kl_in_reward only; default dropped, see below)
    norm_adv_by_std_in_grpo: true                        verl's key; false is the paper's "w/o std" variant
    gdpo_dump_dir:          null                         a folder: each call saves its inputs there (debugging)
Per component ``name`` the estimator reads ``data.batch["token_level_scores_<name>"]`` (bs, T): the data path with
the ``gdpo_multi`` manager, in both trainers (layout in ``gdpo_verl.core.token_scores``: each response's value is
the sum over its tokens, NaN = abstain). Only upstream-style configs (another reward manager whose
``compute_score`` returns a dict) take the scalar path: the per-response values ``non_tensor_batch[name]``
(None = missing); ``gdpo_verl.verl_glue`` puts them there in verl's V1 trainer too.

KL in reward (``algorithm.use_kl_in_reward=true``): verl subtracts the per-token KL penalty from
``token_level_rewards``; its per-response sum is ``(token_level_rewards - token_level_scores).sum(-1)`` (bs,).
``algorithm.gdpo_kl`` says what GDPO does with it: ``dropped`` (default: the reference GDPO run, whose estimator
never read ``token_level_rewards``; the paper's numbers come from it), ``after_norm`` (added to the weighted sum of
normalized rewards before the final normalization, unnormalized: effective scale kl_coef) or ``component`` (one
more reward, normalized inside its group like the others, weight 1: unit scale, as GRPO's KL in groups whose rewards
are all equal).
"""

from __future__ import annotations

import math
import numbers
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from gdpo_verl.components import real_number, yaml_on
from gdpo_verl.core.advantage import (
    F32_MAX,
    FINAL_NORMS,
    Condition,
    apply_conditions,
    final_normalize,
    gdpo_advantages,
)
from gdpo_verl.core.choices import check_choice
from gdpo_verl.core.token_scores import SCORE_PREFIX, per_response

NAME = "gdpo"
BACKENDS = ("fast", "verl")
KL_MODES = ("dropped", "after_norm", "component")


def _get(config, key, default=None):
    value = config.get(key, default) if config is not None else default
    return default if value is None else value


@dataclass(frozen=True)
class GDPOSettings:
    """Validated estimator settings read from the ``algorithm`` config."""

    keys: tuple[str, ...]
    weights: tuple[float, ...]
    conditions: tuple[Condition, ...] = ()
    final_norm: str = "token"
    backend: str = "fast"
    epsilon: float = 1e-6
    norm_by_std: bool = True
    kl: str = "dropped"

    @classmethod
    def from_config(cls, config) -> GDPOSettings:
        """Read and validate ``algorithm.gdpo_*``; every error names the key, the bad value and the fix."""
        keys = list(_get(config, "gdpo_reward_keys", []))
        if not keys:
            raise ValueError(
                "adv_estimator=gdpo needs at least one reward component: set algorithm.gdpo_reward_keys "
                "(e.g. '+algorithm.gdpo_reward_keys=[format,correctness]') or declare reward.gdpo.components"
            )
        if any(not isinstance(k, str) or not k for k in keys) or len(set(keys)) != len(keys):
            raise ValueError(f"algorithm.gdpo_reward_keys must be distinct non-empty names; got {keys}")
        raw_weights = _get(config, "gdpo_reward_weights", None)
        if raw_weights is not None and (isinstance(raw_weights, str) or not hasattr(raw_weights, "__len__")):
            raise ValueError(f"algorithm.gdpo_reward_weights must be a list of numbers; got {raw_weights!r}")
        weights = (
            [1.0] * len(keys)
            if raw_weights is None
            else [real_number(w, f"algorithm.gdpo_reward_weights[{i}]") for i, w in enumerate(raw_weights)]
        )
        if len(weights) != len(keys):
            raise ValueError(
                f"algorithm.gdpo_reward_weights has {len(weights)} values {weights} but gdpo_reward_keys has "
                f"{len(keys)} names {keys}; give one weight per key (or none for equal weights)"
            )
        if not all(math.isfinite(w) for w in weights):
            raise ValueError(f"algorithm.gdpo_reward_weights must be finite numbers; got {weights}")
        conditions = []
        for target, spec in dict(_get(config, "gdpo_reward_conditions", {})).items():
            spec = yaml_on(dict(spec)) if isinstance(spec, Mapping) else spec
            on = spec.get("on") if isinstance(spec, dict) else None
            if target not in keys or on not in keys or on == target:
                raise ValueError(
                    f"algorithm.gdpo_reward_conditions[{target!r}] = {spec} must name two different components "
                    f"from gdpo_reward_keys {keys} "
                    "(form: {<component>: {on: <other component>, threshold: <float>}})"
                )
            threshold = real_number(
                spec.get("threshold", 0.0), f"algorithm.gdpo_reward_conditions[{target!r}].threshold"
            )
            conditions.append(Condition(keys.index(target), keys.index(on), threshold))
        final_norm = check_choice(
            "algorithm.gdpo_final_norm", str(_get(config, "gdpo_final_norm", "token")), FINAL_NORMS
        )
        backend = check_choice("algorithm.gdpo_backend", str(_get(config, "gdpo_backend", "fast")), BACKENDS)
        return cls(
            keys=tuple(keys),
            weights=tuple(weights),
            conditions=tuple(conditions),
            final_norm=final_norm,
            backend=backend,
            epsilon=real_number(_get(config, "gdpo_epsilon", 1e-6), "algorithm.gdpo_epsilon", positive=True),
            norm_by_std=bool(_get(config, "norm_adv_by_std_in_grpo", True)),
            kl=check_choice("algorithm.gdpo_kl", str(_get(config, "gdpo_kl", "dropped")), KL_MODES),
        )


NUMERIC_KINDS = ("floating", "integer", "mixed-integer-float", "decimal", "empty")


def numeric_column(values, where: str, bs: int) -> np.ndarray:
    """(bs,) float64 from per-response values: numbers, None or NaN (missing). Strings and other objects raise a
    ValueError naming ``where``; non-finite numbers stay non-finite here (the math treats them as missing)."""
    values = np.asarray(values)
    if values.shape != (bs,):
        raise ValueError(f"{where} must have shape ({bs},) (one value per response); got {values.shape}")
    if values.dtype.kind in "biuf":
        return values.astype(np.float64)
    kind = pd.api.types.infer_dtype(values, skipna=True)
    if kind not in NUMERIC_KINDS:
        bad = next(v for v in values.tolist() if v is not None and not isinstance(v, numbers.Real))
        raise ValueError(f"{where} must hold numbers or None; found {type(bad).__name__} {bad!r} ({kind} values)")
    return pd.to_numeric(pd.Series(values, dtype=object), errors="coerce").to_numpy(dtype=np.float64)


def collect_scores(keys, batch, non_tensor_batch, bs: int, device) -> torch.Tensor:
    """Per-response scores (bs, K) float64 from per-reward token tensors or non-tensor scalars (NaN = missing).

    A tensor ``token_level_scores_<name>`` (bs, T) contributes its per-response sum (NaN where it abstains).
    Non-finite values are kept as they are: the math treats them as missing. Raises ValueError naming the field
    for a wrong shape or a non-numeric value, and KeyError when a component is nowhere.
    """
    tensor_keys = set(batch.keys()) if batch is not None else set()
    non_tensor = non_tensor_batch if non_tensor_batch is not None else {}
    columns = []
    for key in keys:
        field = SCORE_PREFIX + key
        if field in tensor_keys:
            scores = batch[field]
            if scores.dim() != 2 or scores.shape[0] != bs:
                raise ValueError(f"batch[{field!r}] must be (bs={bs}, response_length); got {tuple(scores.shape)}")
            if not (scores.dtype.is_floating_point or scores.dtype in (torch.int32, torch.int64, torch.bool)):
                raise ValueError(f"batch[{field!r}] must hold numbers; got dtype {scores.dtype}")
            columns.append(per_response(scores))
        elif key in non_tensor:
            values = numeric_column(non_tensor[key], f"non_tensor_batch[{key!r}]", bs)
            columns.append(torch.from_numpy(values).to(device))
        else:
            have_tensors = sorted(k for k in tensor_keys if str(k).startswith(SCORE_PREFIX))
            raise KeyError(
                f"GDPO reward component {key!r} has neither batch[{field!r}] nor non_tensor_batch[{key!r}]. "
                f"Per-reward tensors present: {have_tensors or 'none'}; non-tensor keys present: "
                f"{sorted(non_tensor.keys())}. Check algorithm.gdpo_reward_keys against what the reward manager "
                "returns (with reward.reward_manager.name=gdpo_multi the tensors come from "
                "actor_rollout_ref.rollout.agent.agent_loop_manager_class="
                "gdpo_verl.verl_glue.agent_loop.GDPOAgentLoopManager)."
            )
    return torch.stack(columns, dim=1)


def verl_backend(scores: torch.Tensor, index, response_mask: torch.Tensor, settings: GDPOSettings) -> torch.Tensor:
    """Oracle path: each reward literally through verl's ``compute_grpo_outcome_advantage`` (its Python loop).

    scores: (bs, K); returns (bs, T). Missing values, and values that are not finite in verl's float32, are left out
    by calling verl on the valid rows only; a result verl's float32 arithmetic cannot represent becomes 0 or +-max.
    """
    from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage
    from verl.utils.torch_functional import masked_whiten

    scores = scores.to(torch.float32)
    scores = apply_conditions(torch.where(torch.isfinite(scores), scores, torch.nan), settings.conditions)
    index = np.asarray(index, dtype=object)
    adv = torch.zeros(scores.shape[0], dtype=torch.float32)
    for k, w in enumerate(settings.weights):
        valid = ~torch.isnan(scores[:, k])
        if not valid.any():
            continue
        per_response, _ = compute_grpo_outcome_advantage(
            token_level_rewards=scores[valid, k].unsqueeze(-1),
            response_mask=torch.ones(int(valid.sum()), 1),
            index=index[valid.numpy()],
            epsilon=settings.epsilon,
            norm_adv_by_std_in_grpo=settings.norm_by_std,
        )
        adv[valid] += w * per_response[:, 0]
    present = ~torch.isnan(scores).all(dim=1)
    if settings.final_norm != "token":
        return final_normalize(adv.to(torch.float64), response_mask, settings.final_norm, include=present)
    mask = response_mask * present.unsqueeze(-1)
    if mask.sum() < 2:  # verl's masked_var needs two tokens
        return torch.zeros(response_mask.shape, dtype=torch.float32)
    out = masked_whiten(adv.unsqueeze(-1) * mask, mask) * mask
    return torch.nan_to_num(out, nan=0.0, posinf=F32_MAX, neginf=-F32_MAX)


def compute_gdpo_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index=None,
    epsilon: float = 1e-6,
    norm_adv_by_std_in_grpo: bool = True,
    config=None,
    non_tensor_batch=None,
    batch=None,
    **kwargs,
) -> tuple[torch.Tensor, torch.Tensor]:
    """verl estimator signature. response_mask: (bs, T); index: (bs,) uids. Returns (advantages, returns),
    both (bs, T). Settings come from ``config`` (the ``algorithm`` config), see the module docstring.
    """
    settings = GDPOSettings.from_config(config)
    if index is None:
        raise ValueError("adv_estimator=gdpo needs the batch's 'uid' (group ids) in non_tensor_batch")
    bs = response_mask.shape[0]
    scores = collect_scores(settings.keys, batch, non_tensor_batch, bs, response_mask.device)
    offset, weights = None, settings.weights
    kl_on = settings.kl != "dropped" and _get(config, "use_kl_in_reward", False)
    if kl_on and batch is not None and "token_level_scores" in batch.keys():
        offset = (token_level_rewards - batch["token_level_scores"]).sum(-1)
        if settings.kl == "component":  # one more reward column (bs, K+1), normalized inside its group
            scores = torch.cat([scores, offset.to(scores.dtype).unsqueeze(1)], dim=1)
            offset, weights = None, (*weights, 1.0)
    if settings.backend == "verl":
        if len(weights) != len(settings.weights) or offset is not None:
            raise ValueError(
                "algorithm.gdpo_backend=verl does not take use_kl_in_reward with algorithm.gdpo_kl="
                f"{settings.kl}; use gdpo_backend=fast or gdpo_kl=dropped"
            )
        adv = verl_backend(scores.cpu(), index, response_mask.cpu(), settings).to(response_mask.device)
    else:
        adv = gdpo_advantages(
            scores,
            index,
            response_mask,
            weights,
            norm_by_std=settings.norm_by_std,
            epsilon=settings.epsilon,
            final_norm=settings.final_norm,
            conditions=settings.conditions,
            offset=offset,
        )
    dump_dir = _get(config, "gdpo_dump_dir", None)
    if dump_dir:
        dump_inputs(str(dump_dir), settings.keys, batch, index, response_mask, scores, adv)
    return adv, adv


def dump_inputs(folder: str, keys, batch, index, response_mask, scores, advantages) -> str:
    """Save one call's inputs and output to ``folder/estimator-<time>-<pid>.pt`` (``algorithm.gdpo_dump_dir``):
    the per-reward tensors as received, response_mask, uid, the (bs, K) per-response scores, the advantages."""
    os.makedirs(folder, exist_ok=True)
    present = set(batch.keys()) if batch is not None else set()
    fields = {k: batch[SCORE_PREFIX + k].detach().cpu() for k in keys if SCORE_PREFIX + k in present}
    path = os.path.join(folder, f"estimator-{time.time_ns()}-{os.getpid()}.pt")
    torch.save(
        {
            "keys": list(keys),
            "token_level_scores": fields,
            "response_mask": response_mask.detach().cpu(),
            "uid": [str(u) for u in np.asarray(index, dtype=object)],
            "scores": scores.detach().cpu(),
            "advantages": advantages.detach().cpu(),
        },
        path,
    )
    return path


__all__ = ["BACKENDS", "FINAL_NORMS", "KL_MODES", "GDPOSettings", "compute_gdpo_advantage"]
