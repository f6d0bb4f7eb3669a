"""verl adapter: the ``gdpo`` advantage estimator (and ``gd2po``, ``rvpo``, SAW), registered in verl's registry.

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
    norm_adv_by_std_in_grpo: true                        verl's key; false is the paper's "w/o std" variant
    gdpo_kl:                dropped | after_norm | component   (use_kl_in_reward only; default dropped, see below)
    gdpo_dump_dir:          null                         a folder: each call saves its inputs there (debugging)
    adv_estimator=gd2po | rvpo, gdpo_reward_weighting=saw and their options: ``gdpo_verl.core.methods``. verl hands
    the batch only to an estimator named ``gdpo``, so both trainers' hooks call the ``gdpo`` entry for those names
    too; this function dispatches on ``config.adv_estimator``.
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

import numbers
import os
import time
import uuid

import numpy as np
import pandas as pd
import torch

from gdpo_verl.core.advantage import F32_MAX, final_normalize, gdpo_advantages
from gdpo_verl.core.choices import clipped
from gdpo_verl.core.contract import ESTIMATOR_NAME, SCORE_PREFIX, RewardSettings, field_name, numeric_column
from gdpo_verl.core.methods import MethodSettings, method_advantages
from gdpo_verl.core.token_scores import per_response

NAME = ESTIMATOR_NAME


def _get(config, key, default=None):
    value = config.get(key, default) if config is not None else default
    return default if value is None else value


UID_SCALARS = (str, bytes, numbers.Number, np.generic, uuid.UUID)


def _not_meta(name: str, tensor) -> None:
    if isinstance(tensor, torch.Tensor) and tensor.is_meta:
        raise ValueError(
            f"{name} is on the meta device (shape {tuple(tensor.shape)}, no values): materialize it on a real "
            "device before computing advantages"
        )


def check_mask(response_mask) -> None:
    """``response_mask``: a real (bs, T) tensor of 0s and 1s, in any integer, bool or float dtype."""
    if not isinstance(response_mask, torch.Tensor):
        raise ValueError(f"response_mask must be a (bs, T) tensor; got {type(response_mask).__name__}")
    _not_meta("response_mask", response_mask)
    if response_mask.dim() != 2:
        raise ValueError(f"response_mask must be (bs, T); got shape {tuple(response_mask.shape)}")
    if response_mask.dtype.is_complex:
        raise ValueError(
            f"response_mask must be an integer, bool or float tensor of 0/1; got dtype {response_mask.dtype}"
        )
    if response_mask.dtype == torch.bool:
        return
    if response_mask.dtype.is_floating_point:
        ok = not bool(((response_mask != 0) & (response_mask != 1)).any())
    else:  # one pass, no (bs, T) temporary: the common case (verl's int64 mask) costs a min/max reduction
        low, high = torch.aminmax(response_mask)
        ok = bool(low >= 0) and bool(high <= 1)
    if not ok:
        bad = ~((response_mask == 0) | (response_mask == 1))
        row, col = (int(i) for i in bad.nonzero()[0])
        raise ValueError(
            f"response_mask must hold only 0 and 1; found {response_mask[row, col].item()!r} at [{row}, {col}] "
            f"(dtype {response_mask.dtype})"
        )


def check_uids(index, bs: int) -> None:
    """``index`` (the batch's ``uid``): (bs,) hashable scalars (strings, numbers, UUIDs), no lists or dicts."""
    if isinstance(index, torch.Tensor):
        _not_meta("uid", index)
        shape = tuple(index.shape)
    else:
        array = index if isinstance(index, np.ndarray) else np.asarray(index, dtype=object)
        shape = array.shape
    if shape != (bs,):
        raise ValueError(f"uid must have shape ({bs},) (one group id per response); got shape {shape}")
    if isinstance(index, torch.Tensor):
        return
    if array.dtype != object:
        return  # numbers or strings by dtype
    if pd.api.types.infer_dtype(array, skipna=False) in ("mixed", "mixed-integer", "unknown-array"):
        bad = next((u for u in array if not isinstance(u, UID_SCALARS)), None)
        if bad is not None:
            raise ValueError(
                f"uid must hold hashable scalars (strings, numbers); found {type(bad).__name__} {clipped(bad, 60)}"
            )


def collect_scores(keys, batch, non_tensor_batch, bs: int, device, shape: tuple | None = None) -> torch.Tensor:
    """Per-response scores (bs, K) float64 from per-reward token tensors or non-tensor scalars (NaN = missing).

    A tensor ``token_level_scores_<name>`` (bs, T; exactly ``shape``, the response mask's, when given) contributes
    its per-response sum (NaN where it abstains). Non-finite values are kept as they are: the math treats them as
    missing. Raises ValueError naming the field for a wrong shape, a meta tensor or a non-numeric value, and
    KeyError when a component is nowhere.
    """
    tensor_keys = set(batch.keys()) if batch is not None else set()
    non_tensor = non_tensor_batch if non_tensor_batch is not None else {}
    columns = []
    for key in keys:
        field = field_name(key)
        if field in tensor_keys:
            scores = batch[field]
            _not_meta(f"batch[{field!r}]", scores)
            if scores.dim() != 2 or scores.shape[0] != bs or (shape is not None and tuple(scores.shape) != shape):
                expected = f"{shape} (response_mask's shape)" if shape is not None else f"(bs={bs}, response_length)"
                raise ValueError(f"batch[{field!r}] must be {expected}; got {tuple(scores.shape)}")
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


def verl_backend(scores: torch.Tensor, index, response_mask: torch.Tensor, settings: RewardSettings) -> torch.Tensor:
    """Oracle path: each reward literally through verl's ``compute_grpo_outcome_advantage`` (its Python loop).

    scores: (bs, K); returns (bs, T). Missing values, and values that are not finite in verl's float32, are left out
    by calling verl on the valid rows only; a result verl's float32 arithmetic cannot represent becomes 0 or +-max.
    """
    from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage
    from verl.utils.torch_functional import masked_whiten

    scores = scores.to(torch.float32)
    scores = settings.gate(torch.where(torch.isfinite(scores), scores, torch.nan))
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
    config=None,
    index=None,
    reward_baselines=None,
    non_tensor_batch=None,
    batch=None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The keyword arguments verl's ``compute_advantage`` passes an estimator named ``gdpo`` (``reward_baselines``
    is not used). response_mask: (bs, T); index: (bs,) uids. Returns (advantages, returns), both (bs, T). Settings
    come from ``config`` (the ``algorithm`` config), see the module docstring.
    """
    settings = RewardSettings.from_algorithm(config)
    method = MethodSettings.from_algorithm(config, len(settings.keys))
    if index is None:
        raise ValueError("adv_estimator=gdpo needs the batch's 'uid' (group ids) in non_tensor_batch")
    check_mask(response_mask)
    _not_meta("token_level_rewards", token_level_rewards)
    bs = response_mask.shape[0]
    check_uids(index, bs)
    shape = tuple(response_mask.shape)
    scores = collect_scores(settings.keys, batch, non_tensor_batch, bs, response_mask.device, shape)
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
        if not method.plain_gdpo:
            raise ValueError(
                f"algorithm.gdpo_backend=verl is the oracle of plain GDPO; adv_estimator={method.estimator} with "
                f"gdpo_reward_weighting={method.weighting} needs gdpo_backend=fast"
            )
        adv = verl_backend(scores.cpu(), index, response_mask.cpu(), settings).to(response_mask.device)
    elif not method.plain_gdpo:
        adv = method_advantages(settings, method, scores, index, response_mask, offset)
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


__all__ = ["NAME", "collect_scores", "compute_gdpo_advantage"]
