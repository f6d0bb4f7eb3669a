"""RVPO advantage math (arXiv 2605.05750): GDPO's per-reward z-scores aggregated by a soft minimum (LogSumExp).

Framework-free (torch only), vectorized. No code from the authors is public; this follows the paper's equation.
Selected in verl as ``algorithm.adv_estimator=rvpo`` with ``algorithm.rvpo_risk`` (k). Shapes: ``bs`` responses,
``K`` rewards, ``T`` response tokens.

    >>> import torch
    >>> scores = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [0.0, 0.0]])
    >>> a = rvpo_advantages(scores, ["p"] * 4, torch.ones(4, 1), risk=1.0, final_norm="none")
    >>> [round(v, 3) for v in a[:, 0].tolist()]   # (1,0) and (0,1) now score below their mean 0
    [-0.336, -0.336, 0.866, -0.866]

Equations:
  1. ``Z[i,k]`` (bs, K): GDPO's per-reward group z-score (verl's GRPO per reward: eps 1e-6, unbiased std).
  2. ``A[i] = -(1/k) ln( sum_j p_j exp(-k Z[i,j]) )`` (bs,), ``p_j = w_j / sum w`` (K,) (the paper: ``p_j = 1/K``,
     the default). Second-order expansion: ``A ~ mean_p(Z) - (k/2) var_p(Z)``: the mean minus a penalty on the
     spread between rewards; ``k -> 0`` is GDPO's sum divided by K, ``k -> inf`` the minimum over rewards.
  3. ``A[i] + offset_i``, then GDPO's final step (``final_norm``: ``token`` whitening as verl's GDPO, ``sequence``,
     ``none``). Output: (bs, T) float32, zero on padding, finite always.
Not fixed by the paper (choices here, say so when comparing): the value of k (no default in the paper's abstract;
``rvpo_risk`` is required), the final step (GDPO's, as RVPO is presented as a generalization of GDPO), and
per-reward weights (``p_j`` above; must be positive). Abstentions: a missing reward has ``Z = 0`` (as it adds 0 to
GDPO's sum); a response whose rewards are all missing gets 0 and is left out of the final statistics.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from gdpo_verl.core.advantage import Condition, check_final_norm, decouple, final_normalize


def check_risk(risk, what: str = "rvpo_risk") -> float:
    """Return the risk coefficient k as a float; ValueError naming the bad value otherwise."""
    if isinstance(risk, bool) or not isinstance(risk, int | float) or not (math.isfinite(risk) and risk > 0):
        raise ValueError(f"{what}={risk!r} must be a finite number > 0 (small: GDPO's mean; large: the minimum)")
    return float(risk)


def soft_min(z: torch.Tensor, weights: torch.Tensor, risk: float) -> torch.Tensor:
    """Step 2. z: (bs, K) float64; weights: (K,) positive. Returns (bs,) float64 (LogSumExp, overflow-safe)."""
    if (weights <= 0).any():
        raise ValueError(f"rvpo needs positive per-reward weights; got {weights.tolist()}")
    log_p = torch.log(weights / weights.sum())
    return -torch.logsumexp(-risk * z + log_p, dim=1) / risk


def rvpo_advantages(
    scores: torch.Tensor,
    uids,
    response_mask: torch.Tensor,
    weights: Sequence[float] | torch.Tensor | None = None,
    *,
    risk: float,
    norm_by_std: bool = True,
    epsilon: float = 1e-6,
    final_norm: str = "token",
    conditions: Sequence[Condition] = (),
    offset: torch.Tensor | None = None,
) -> torch.Tensor:
    """RVPO advantages. scores: (bs, K) raw rewards (NaN = missing); uids: (bs,); response_mask: (bs, T);
    offset: optional (bs,) term added before the final step. Returns (bs, T) float32 (0 on padding)."""
    check_final_norm(final_norm)
    risk = check_risk(risk)
    d = decouple(scores, uids, response_mask, weights, norm_by_std=norm_by_std, epsilon=epsilon,
                 conditions=conditions, offset=offset)  # fmt: skip
    adv = soft_min(d.adv_k, d.weights, risk) + d.offset
    return final_normalize(adv, response_mask, final_norm, include=d.present, epsilon=epsilon)


def rvpo_metrics(
    scores: torch.Tensor,
    uids,
    response_mask: torch.Tensor,
    weights: Sequence[float] | torch.Tensor | None = None,
    *,
    risk: float,
    norm_by_std: bool = True,
    epsilon: float = 1e-6,
    conditions: Sequence[Condition] = (),
) -> dict[str, float]:
    """What the soft minimum did, logged under ``gdpo/rvpo/...``: ``penalty`` = mean over present responses of
    (weighted mean of Z) - A (>= 0: how much the spread between rewards cost), ``spread`` = mean weighted std of Z."""
    d = decouple(scores, uids, response_mask, weights, norm_by_std=norm_by_std, epsilon=epsilon,
                 conditions=conditions)  # fmt: skip
    p = d.weights / d.weights.sum()
    mean = d.adv_k @ p
    gap = (mean - soft_min(d.adv_k, d.weights, check_risk(risk)))[d.present]
    spread = (((d.adv_k - mean.unsqueeze(1)) ** 2) @ p).sqrt()[d.present]
    if not gap.numel():
        return {"gdpo/rvpo/penalty": 0.0, "gdpo/rvpo/spread": 0.0}
    return {"gdpo/rvpo/penalty": gap.mean().item(), "gdpo/rvpo/spread": spread.mean().item()}
