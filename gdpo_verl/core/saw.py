"""SAW advantage math (arXiv 2606.07705): reward weights from each reward's coefficient of variation, per batch.

Framework-free (torch only), vectorized. SAW modifies the weights of GDPO (``algorithm.gdpo_reward_weighting=saw``)
or of GRPO on the same rewards; everything else is :mod:`gdpo_verl.core.advantage`. Shapes: ``bs`` responses,
``K`` rewards, ``T`` response tokens, ``G`` groups.

    >>> import torch
    >>> scores = torch.tensor([[3.0, 1.0], [-3.0, 0.0], [1.5, 1.0], [3.0, 1.0]])  # correctness [-3, 3], format
    >>> w, cv = saw_weights(scores, offsets=[3.0, 0.0])
    >>> [round(v, 4) for v in w.tolist()]
    [1.016, 0.984]

Equations (the authors' code, ``verl/trainer/ppo/ray_trainer.py`` of Zhaolutuan/SAW, ``gdpo-h`` and ``grpo-h``):
  1. shifted rewards ``x[i,k] = r[i,k] + c_k`` (bs, K); ``c`` (K,) the offsets (the code shifts a [-3, 3]
     correctness by +3 and nothing else; default 0 here).
  2. ``CV_k = std_i(x[:,k]) / (|mean_i(x[:,k])| + 1e-8)`` (K,), unbiased std over the WHOLE batch (not per group).
  3. ``w_k = K CV_k / (sum_j CV_j + 1e-8)`` (K,): the code has two rewards and multiplies by 2; K keeps the
     weights' mean at 1 for any number of rewards, as unit weights. Configured weights ``v_k`` multiply:
     ``v_k w_k`` (all 1 in the code).
  4. ``gdpo`` (``gdpo-h``): ``A_sum[i] = sum_k v_k w_k A[i,k]`` with GDPO's per-reward group z-scores, then GDPO's
     final step (the code whitens over tokens: ``final_norm="token"``);
     ``grpo`` (``grpo-h``): ``A[i] = groupz(sum_k v_k w_k r[i,k])`` (verl's GRPO on the weighted sum, missing
     values counting 0), no final step, broadcast over the response's tokens.
  Output: (bs, T) float32, zero on padding, finite always; ``saw_weights`` returns (w (K,), CV (K,)) float64.

Code vs paper: the code takes the CV over the whole batch; ``scope="group"`` gives the per-group variant
(``CV[g,k]`` over group g's values, weights (G, K) normalized per group), offered as the paper's reading.
Abstentions: a missing value (NaN, non-finite) is left out of the CV statistics; a reward with fewer than two
present values (in the batch, or in the group for ``scope="group"``) has ``CV = 0`` and so weight 0 (as a
constant reward does in the code). When every CV is 0 all weights are 0 and so are the advantages (the code's
behaviour). Rewards beyond +-1e100 are rescaled per reward before the moments (the CV does not change but for
the 1e-8), so the weights stay finite.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from gdpo_verl.core.advantage import (
    HUGE,
    Condition,
    apply_conditions,
    check_final_norm,
    decouple,
    final_normalize,
    grpo_advantages,
)
from gdpo_verl.core.choices import check_choice

SAW_BASES = ("gdpo", "grpo")
SAW_SCOPES = ("batch", "group")
CV_EPS = 1e-8  # the code's epsilon in the CV and in the weight normalization


def check_offsets(offsets: Sequence[float] | None, k: int, what: str = "gdpo_saw_offsets") -> list[float]:
    """Return ``offsets`` as K floats (None -> zeros); ValueError naming the bad value otherwise."""
    if offsets is None:
        return [0.0] * k
    values = list(offsets)
    if len(values) != k or not all(
        isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) for v in values
    ):
        raise ValueError(f"{what}={values!r} must be {k} finite numbers, one per reward (e.g. [3.0, 0.0])")
    return [float(v) for v in values]


def saw_weights(
    scores: torch.Tensor,
    offsets: Sequence[float] | None = None,
    *,
    group: torch.Tensor | None = None,
    num_groups: int = 1,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Steps 1-3. scores: (bs, K), NaN = missing. Returns (weights, CV) float64, each (K,) over the batch, or
    (num_groups, K) per group when ``group`` (bs,) int64 is given."""
    bs, k = scores.shape
    c = torch.tensor(check_offsets(offsets, k), dtype=torch.float64, device=scores.device)
    x = scores.to(torch.float64) + c
    valid = torch.isfinite(x)
    x = torch.where(valid, x, 0.0)
    scale = x.abs().amax(dim=0, keepdim=True) if bs else torch.ones(1, k, dtype=torch.float64, device=x.device)
    x = torch.where(scale > HUGE, x / scale, x)
    batch = group is None
    if batch:
        group, num_groups = torch.zeros(bs, dtype=torch.int64, device=x.device), 1

    def per_group(values: torch.Tensor) -> torch.Tensor:  # (bs, K) -> (num_groups, K)
        return torch.zeros(num_groups, k, dtype=torch.float64, device=x.device).index_add_(0, group, values)

    n = per_group(valid.to(torch.float64))
    mean = per_group(x) / n.clamp(min=1)
    centered = torch.where(valid, x - mean[group], 0.0)
    std = (per_group(centered * centered) / (n - 1).clamp(min=1)).sqrt()
    cv = std / (mean.abs() + CV_EPS)  # fewer than 2 values: std 0, so CV 0
    w = k * cv / (cv.sum(dim=1, keepdim=True) + CV_EPS)
    return (w[0], cv[0]) if batch else (w, cv)


def saw_advantages(
    scores: torch.Tensor,
    uids,
    response_mask: torch.Tensor,
    weights: Sequence[float] | torch.Tensor | None = None,
    *,
    offsets: Sequence[float] | None = None,
    base: str = "gdpo",
    scope: str = "batch",
    norm_by_std: bool = True,
    epsilon: float = 1e-6,
    final_norm: str = "token",
    conditions: Sequence[Condition] = (),
    offset: torch.Tensor | None = None,
) -> torch.Tensor:
    """SAW on GDPO or GRPO. scores: (bs, K) raw rewards (NaN = missing); uids: (bs,); response_mask: (bs, T);
    ``offsets`` (K,) shift each reward before its CV; ``offset`` (bs,) is the KL term added to the advantage
    (GDPO base only). Returns (bs, T) float32 (0 on padding). ``final_norm`` applies to the GDPO base only."""
    check_choice("saw base", base, SAW_BASES)
    check_choice("saw scope", scope, SAW_SCOPES)
    check_final_norm(final_norm)
    d = decouple(scores, uids, response_mask, weights, norm_by_std=norm_by_std, epsilon=epsilon,
                 conditions=conditions, offset=offset)  # fmt: skip
    per_group = scope == "group"
    w, _ = saw_weights(d.scores, offsets, group=d.group if per_group else None, num_groups=d.num_groups)
    w_eff = d.weights * (w[d.group] if per_group else w)  # (bs, K) or (K,)
    if base == "gdpo":
        adv = (d.adv_k * w_eff).sum(-1) + d.offset
        return final_normalize(adv, response_mask, final_norm, include=d.present, epsilon=epsilon)
    adv = grpo_advantages(d.scores, d.group, d.num_groups, w_eff, norm_by_std=norm_by_std, epsilon=epsilon)
    return final_normalize(adv, response_mask, "none", include=d.present, epsilon=epsilon)


def saw_metrics(
    scores: torch.Tensor,
    names: Sequence[str],
    offsets: Sequence[float] | None = None,
    *,
    conditions: Sequence[Condition] = (),
) -> dict[str, float]:
    """SAW's batch weights, logged as ``gdpo/saw/<name>/weight`` and ``gdpo/saw/<name>/cv``.
    scores: (bs, K) raw rewards, NaN = missing (conditions applied here as in the estimator)."""
    scores = scores.to(torch.float64)
    scores = apply_conditions(torch.where(torch.isfinite(scores), scores, torch.nan), conditions)
    w, cv = saw_weights(scores, offsets)
    out: dict[str, float] = {}
    for k, name in enumerate(names):
        out[f"gdpo/saw/{name}/weight"] = w[k].item()
        out[f"gdpo/saw/{name}/cv"] = cv[k].item()
    return out
