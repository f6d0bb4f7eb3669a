"""GDPO advantage math: per-reward group normalization, weighted sum, final normalization.

Framework-free (torch only; pandas only to factorize arbitrary group ids). The verl adapter registered as the
``gdpo`` estimator is ``gdpo_verl.estimator``. Shapes: ``bs`` responses, ``K`` rewards, ``T`` response tokens.

    >>> import torch
    >>> scores = torch.tensor([[0.0, 1.0], [0.0, 2.0]])          # one G=2 group, (format, correctness)
    >>> a = gdpo_advantages(scores, ["p0", "p0"], torch.ones(2, 3), final_norm="none")
    >>> [round(v, 3) for v in a[:, 0].tolist()]                  # reward 0 is constant -> 0; reward 1 -> -+1/sqrt2
    [-0.707, 0.707]

Semantics (defaults reproduce verl's ``compute_grpo_outcome_advantage`` per reward):
  1. group step, per reward k and uid group g, over the group's non-missing values:
     ``A[i,k] = (r[i,k] - mean_g) / (std_g + eps)`` with unbiased std; a group with one value uses
     mean 0 / std 1 (verl's singleton rule); a group whose values are all equal gives 0.
  2. ``A_sum[i] = sum_k w_k A[i,k]``; weights act after normalization.
  3. final step: ``token`` whitens A_sum over valid tokens like verl's ``masked_whiten`` (token-weighted
     mean, unbiased variance over the token count, ``rsqrt(var + 1e-8)``); ``sequence`` normalizes one
     value per response (``(x - mean) / (std + eps)``, as in the paper and TRL); ``none`` keeps A_sum.
Missing values (NaN) abstain: left out of their group's statistics and contributing 0. A response whose
rewards are all missing gets advantage 0 and, like a response with no valid token, is left out of the
final statistics. No Python loop runs over samples or groups.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from gdpo_verl.core.choices import check_choice

FINAL_NORMS = ("token", "sequence", "none")
WHITEN_EPS = 1e-8  # verl's masked_whiten constant
HUGE = 1e100  # rewards beyond this magnitude are rescaled before the group statistics (see group_normalize)
F32_MAX = torch.finfo(torch.float32).max


@dataclass(frozen=True)
class Condition:
    """Paper Eq. 8: reward ``target`` counts only where reward ``on`` >= ``threshold`` (else 0).

    Where ``on`` is missing (NaN) the condition cannot be decided and ``target`` is missing too.
    """

    target: int
    on: int
    threshold: float


def check_final_norm(final_norm: str) -> str:
    """Return ``final_norm`` if valid, else raise a ValueError that lists the valid names."""
    return check_choice("final_norm", final_norm, FINAL_NORMS)


def group_index(uids, device: torch.device | str | None = None) -> tuple[torch.Tensor, int]:
    """Map arbitrary hashable group ids (bs,) to dense indices (bs,) int64 in order of first appearance.

    A LongTensor is taken as already dense-able and factorized the same way.
    """
    if isinstance(uids, torch.Tensor):
        uniq, inverse = torch.unique(uids, return_inverse=True)
        return inverse.to(device=device or uids.device), int(uniq.numel())
    import pandas as pd

    codes, uniques = pd.factorize(np.asarray(uids, dtype=object) if not isinstance(uids, np.ndarray) else uids)
    if (codes < 0).any():
        raise ValueError("group ids (uid) must not be None/NaN")
    return torch.from_numpy(codes.astype(np.int64)).to(device), len(uniques)


def apply_conditions(scores: torch.Tensor, conditions: Sequence[Condition]) -> torch.Tensor:
    """Apply conditioned rewards in order. scores: (bs, K) -> (bs, K) (a new tensor when conditions exist)."""
    if not conditions:
        return scores
    scores = scores.clone()
    for c in conditions:
        gate = scores[:, c.on]
        scores[:, c.target] = torch.where(
            torch.isnan(gate), torch.nan, torch.where(gate >= c.threshold, scores[:, c.target], 0.0)
        )
    return scores


def constant_groups(x: torch.Tensor, valid: torch.Tensor, group: torch.Tensor, num_groups: int) -> torch.Tensor:
    """(num_groups, K) bool: the group's valid values of reward k are all equal (True for empty groups too).

    x, valid: (bs, K); group: (bs,) int64. One amax and one amin scatter over all rewards at once.
    """
    k = x.shape[1]
    flat = (group.unsqueeze(1) * k + torch.arange(k, device=group.device)).reshape(-1)
    x = x.to(torch.float64)
    hi = torch.full((num_groups * k,), -torch.inf, dtype=torch.float64, device=x.device)
    hi = hi.scatter_reduce(0, flat, torch.where(valid, x, -torch.inf).reshape(-1), "amax")
    lo = torch.full((num_groups * k,), torch.inf, dtype=torch.float64, device=x.device)
    lo = lo.scatter_reduce(0, flat, torch.where(valid, x, torch.inf).reshape(-1), "amin")
    return ((hi == lo) | torch.isinf(hi)).view(num_groups, k)


def group_normalize(
    scores: torch.Tensor,
    group: torch.Tensor,
    num_groups: int,
    *,
    norm_by_std: bool = True,
    epsilon: float = 1e-6,
) -> torch.Tensor:
    """Normalize each reward inside its group. scores: (bs, K), NaN = missing; group: (bs,) int64.

    Returns (bs, K) float64 advantages, 0 where the score is missing. Statistics are computed in float64
    with one ``index_add_`` per moment over all rewards at once (group-major layout ``g * K + k``).
    """
    bs, k = scores.shape
    scores = scores.to(torch.float64)
    valid = torch.isfinite(scores)  # NaN and +-inf abstain
    x = torch.where(valid, scores, 0.0)
    # A reward whose values reach beyond +-HUGE is rescaled (per reward, over the batch) so that no second moment
    # overflows float64; below that (every real reward) nothing is rescaled and the result is verl's exactly.
    scale = x.abs().amax(dim=0, keepdim=True) if bs else torch.ones(1, k, dtype=torch.float64)
    x = torch.where(scale > HUGE, x / scale, x)
    flat = (group.unsqueeze(1) * k + torch.arange(k, device=group.device)).reshape(-1)  # (bs*K,)

    def per_group(values: torch.Tensor) -> torch.Tensor:  # (bs, K) -> (num_groups, K)
        out = torch.zeros(num_groups * k, dtype=torch.float64, device=values.device)
        return out.index_add_(0, flat, values.reshape(-1)).view(num_groups, k)

    count = per_group(valid.to(torch.float64))
    mean = per_group(x) / count.clamp(min=1)
    centered = torch.where(valid, x - mean[group], 0.0)
    std = (per_group(centered * centered) / (count - 1).clamp(min=1)).sqrt()
    single = count == 1
    mean = torch.where(single, 0.0, mean)
    std = torch.where(single, 1.0, std)
    # A group whose values are all equal gives 0 exactly (not rounding noise divided by eps).
    constant = constant_groups(x, valid, group, num_groups) & ~single
    adv = x - mean[group]
    if norm_by_std:
        adv = adv / (std[group] + epsilon)
    return torch.where(valid & ~constant[group], adv, 0.0)


def final_normalize(
    adv: torch.Tensor,
    response_mask: torch.Tensor,
    final_norm: str = "token",
    *,
    include: torch.Tensor | None = None,
    epsilon: float = 1e-6,
) -> torch.Tensor:
    """Final normalization over the batch. adv: (bs,) float64; response_mask: (bs, T) -> (bs, T) float32.

    ``include`` (bs,) bool marks responses allowed in the statistics (default: all); responses outside it
    get 0. Responses without valid tokens never count. With fewer than two counted tokens (``token``) or
    responses (``sequence``) the output is 0.
    """
    check_final_norm(final_norm)
    # The output is built in a float32 copy of the mask: one pass reads the mask (int64 in verl), the
    # length sum reads the copy, and the final scaling happens in place. No other (bs, T) tensor is made.
    out = response_mask.clone() if response_mask.dtype == torch.float32 else response_mask.to(torch.float32)
    lengths = out.sum(-1).to(torch.float64)  # (bs,); exact for token counts below 2**24
    counted = lengths > 0 if include is None else include & (lengths > 0)
    if final_norm == "none":
        value = torch.where(counted, adv, 0.0)
    else:
        w = torch.where(counted, lengths if final_norm == "token" else 1.0, 0.0)
        n = w.sum()
        mean = (w * adv).sum() / n.clamp(min=1)
        var = (w * (adv - mean) ** 2).sum() / (n - 1).clamp(min=1)
        if final_norm == "token":
            scaled = (adv - mean) * torch.rsqrt(var + WHITEN_EPS)
        else:
            scaled = (adv - mean) / (var.sqrt() + epsilon)
        value = torch.where(counted & (n >= 2), scaled, 0.0)
    value = torch.nan_to_num(value, nan=0.0, posinf=F32_MAX, neginf=-F32_MAX).clamp(-F32_MAX, F32_MAX)
    return out.mul_(value.to(torch.float32).unsqueeze(-1))


def weight_vector(weights: Sequence[float] | torch.Tensor | None, scores: torch.Tensor) -> torch.Tensor:
    """(K,) float64 weights on ``scores``' device; None means 1 for each of the K rewards of scores (bs, K)."""
    if weights is None:
        return torch.ones(scores.shape[1], dtype=torch.float64, device=scores.device)
    return torch.as_tensor(weights, dtype=torch.float64, device=scores.device)


def weighted_total(scores: torch.Tensor, weights: Sequence[float] | torch.Tensor | None = None) -> torch.Tensor:
    """(bs, K) scores -> (bs,) float64 ``sum_k w_k r_k``, a missing (NaN) value counting 0. weights: (K,), or
    (bs, K) for one weight vector per response."""
    return (torch.nan_to_num(scores.to(torch.float64)) * weight_vector(weights, scores)).sum(-1)


def check_shapes(scores, uids, response_mask, conditions=(), offset=None) -> None:
    """ValueError naming the tensor and both shapes when the inputs do not fit together."""
    if response_mask.dim() != 2:
        raise ValueError(f"response_mask must be (bs, T); got shape {tuple(response_mask.shape)}")
    bs = response_mask.shape[0]
    if scores.dim() != 2 or scores.shape[0] != bs:
        raise ValueError(f"scores must be (bs, K) with bs={bs} (response_mask {tuple(response_mask.shape)}); "
                         f"got shape {tuple(scores.shape)}")  # fmt: skip
    if len(uids) != bs:
        raise ValueError(f"uids (group ids) must have one entry per response: {len(uids)} for response_mask "
                         f"{tuple(response_mask.shape)}")  # fmt: skip
    if offset is not None and tuple(offset.shape) != (bs,):
        raise ValueError(f"offset must be (bs,)=({bs},); got shape {tuple(offset.shape)}")
    k = scores.shape[1]
    for c in conditions:
        if not (0 <= c.target < k and 0 <= c.on < k) or c.target == c.on or not math.isfinite(c.threshold):
            raise ValueError(f"condition {c} must name two different rewards in [0, {k}) and a finite threshold")


@dataclass(frozen=True)
class Decoupled:
    """GDPO's per-reward group step, shared by every method built on it (GDPO, GD2PO, SAW).

    scores: (bs, K) float64 rewards after conditions, NaN = missing (non-finite values abstain);
    adv_k: (bs, K) float64 per-reward group advantages (0 where missing); weights: (K,) float64;
    group: (bs,) int64 dense group index, num_groups groups; present: (bs,) bool, not every reward missing;
    offset: (bs,) float64 term for A_sum (0 where none or non-finite).
    """

    scores: torch.Tensor
    adv_k: torch.Tensor
    weights: torch.Tensor
    group: torch.Tensor
    num_groups: int
    present: torch.Tensor
    offset: torch.Tensor


def decouple(
    scores: torch.Tensor,
    uids,
    response_mask: torch.Tensor,
    weights: Sequence[float] | torch.Tensor | None = None,
    *,
    norm_by_std: bool = True,
    epsilon: float = 1e-6,
    conditions: Sequence[Condition] = (),
    offset: torch.Tensor | None = None,
) -> Decoupled:
    """Check the inputs, apply conditions, and normalize each reward inside its group (steps 1 of the docstring)."""
    check_shapes(scores, uids, response_mask, conditions, offset)
    group, num_groups = group_index(uids, device=scores.device)
    scores = scores.to(torch.float64)
    scores = apply_conditions(torch.where(torch.isfinite(scores), scores, torch.nan), conditions)
    adv_k = group_normalize(scores, group, num_groups, norm_by_std=norm_by_std, epsilon=epsilon)
    w = weight_vector(weights, scores)
    if w.shape != (scores.shape[1],) or not torch.isfinite(w).all():
        raise ValueError(f"weights must be {scores.shape[1]} finite numbers, one per reward; got {w.tolist()}")
    extra = torch.zeros(scores.shape[0], dtype=torch.float64, device=scores.device)
    if offset is not None:
        extra = torch.nan_to_num(offset.to(torch.float64), nan=0.0, posinf=0.0, neginf=0.0)
    present = ~torch.isnan(scores).all(dim=1)
    return Decoupled(scores, adv_k, w, group, num_groups, present, extra)


def gdpo_advantages(
    scores: torch.Tensor,
    uids,
    response_mask: torch.Tensor,
    weights: Sequence[float] | torch.Tensor | None = None,
    *,
    norm_by_std: bool = True,
    epsilon: float = 1e-6,
    final_norm: str = "token",
    conditions: Sequence[Condition] = (),
    offset: torch.Tensor | None = None,
) -> torch.Tensor:
    """GDPO advantages. scores: (bs, K) raw rewards (NaN = missing); uids: (bs,) group ids;
    response_mask: (bs, T); offset: optional (bs,) term added to A_sum before the final step (the
    estimator's KL-in-reward penalty). Returns (bs, T) float32 advantages (zero on padding).
    """
    check_final_norm(final_norm)
    d = decouple(scores, uids, response_mask, weights, norm_by_std=norm_by_std, epsilon=epsilon,
                 conditions=conditions, offset=offset)  # fmt: skip
    adv = d.adv_k @ d.weights + d.offset  # (bs,)
    return final_normalize(adv, response_mask, final_norm, include=d.present, epsilon=epsilon)


def grpo_advantages(
    scores: torch.Tensor,
    group: torch.Tensor,
    num_groups: int,
    weights: Sequence[float] | torch.Tensor | None = None,
    *,
    norm_by_std: bool = True,
    epsilon: float = 1e-6,
) -> torch.Tensor:
    """The GRPO baseline on the same rewards: sum with weights first (missing values count 0), then normalize
    the sum inside each group. scores: (bs, K); group: (bs,) int64 dense index. Returns (bs,) float64, one value
    per response (verl broadcasts it over the response's tokens). ``norm_by_std=False`` is "GRPO w/o std".
    ``weights`` may also be (bs, K): one weight vector per response (SAW's per-group weights).
    """
    total = weighted_total(scores, weights)
    return group_normalize(total.unsqueeze(1), group, num_groups, norm_by_std=norm_by_std, epsilon=epsilon)[:, 0]
