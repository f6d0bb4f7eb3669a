"""GD2PO advantage math (arXiv 2606.16771): GDPO plus conflict-aware rollout masking and query reweighting.

Framework-free (torch only), vectorized (no Python loop over samples or groups). The per-reward group step, the
conditions, abstentions and the final step are GDPO's (:mod:`gdpo_verl.core.advantage`). Selected in verl as
``algorithm.adv_estimator=gd2po``. Shapes: ``bs`` responses, ``K`` rewards, ``T`` response tokens, ``G`` groups.

    >>> import torch
    >>> scores = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [0.0, 0.0]])   # one G=4 group
    >>> a = gd2po_advantages(scores, ["p"] * 4, torch.ones(4, 2), filter="sign", final_norm="none")
    >>> [round(v, 3) for v in a[:, 0].tolist()]     # (1,0) and (0,1) conflict: masked; kappa = 2/4
    [0.0, 0.0, 0.866, -0.866]

Equations (the authors' code, ``tool-calling/verl/trainer/ppo/ray_trainer.py`` of Qwen-Applications/GD2PO):
  1. ``A[i,k]`` (bs, K): GDPO's per-reward group z-score (verl's GRPO per reward: eps 1e-6, unbiased std).
  2. ``u[i,k] = w_k A[i,k] L_i`` (bs, K), ``L_i`` (bs,) the response's token count: the code compares the
     per-reward advantages summed over the response's tokens (``L_i`` changes nothing but the 1e-8 constants).
  3. conflict ``c_i`` (bs,) bool: ``any_k u[i,k] > 1e-8`` and ``any_k u[i,k] < -1e-8`` (mixed signs).
  4. keep ``m_i`` (bs,) bool:
       ``sign`` (the authors' "Hard", ``gdpo_filter_group_ratio``):  ``m_i = not c_i``
       ``snr``  (``gdpo_filter_ratio_conflict_group_ratio``):  ``s_i = sum_k u[i,k] / (sum_k |u[i,k]| + 1e-8)``,
                ``m_i = not (c_i and |s_i| < tau)``,  tau in [0, 1] (the authors' scripts use 0.8).
  5. query weight ``kappa_g = (kept responses of g) / (responses of g)`` (G,); with ``group_reweight`` off, 1.
  6. ``A_sum[i] = kappa_{g(i)} (sum_k w_k A[i,k] + offset_i)`` (bs,); masked responses get 0 and are left out of
     the final step's statistics (``token``: whitening over the kept tokens, token-weighted, unbiased variance,
     ``rsqrt(var + 1e-8)``, as the code; ``none`` keeps ``A_sum``; all zeros when nothing is kept).
  Output: (bs, T) float32, zero on padding, finite always.

Where the paper and the code differ (this module follows the code; ``rule="paper"`` gives the paper's figure):
  - the code masks only rollouts with mixed signs: a rollout whose advantages are all zero is kept and counted in
    ``kappa``; the paper's figure drops every rollout whose SNR is at most tau, so under ``rule="paper"``
    ``snr`` keeps ``|s_i| > tau`` and ``sign`` keeps rollouts without mixed signs and with some non-zero ``u``;
  - the code keeps ``|s_i| = tau`` (strict ``<``); the paper drops it (``rule="paper"``);
  - the code has no per-reward weights (all 1, the default here); with weights, conflicts and SNR are judged on the
    weighted terms ``w_k A[i,k]`` that the sum adds up;
  - the code whitens (``final_norm="token"``); the paper's figure has no final step (``final_norm="none"``).
Abstentions: a missing reward (NaN, or a non-finite value) has ``A[i,k] = 0``, so it is neither positive nor
negative; a response whose rewards are all missing gets 0 and counts in neither side of ``kappa``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from gdpo_verl.core.advantage import Condition, Decoupled, check_final_norm, decouple, final_normalize
from gdpo_verl.core.choices import check_choice

GD2PO_FILTERS = ("sign", "snr")
GD2PO_RULES = ("code", "paper")
SIGN_EPS = 1e-8  # the code's threshold for a positive / negative rollout advantage
SNR_EPS = 1e-8  # the code's gdpo_filter_ratio_conflict_eps
DEFAULT_TAU = 0.8  # the authors' tool-calling scripts (their yaml default is 0.2)


def check_gd2po_options(filter: str, tau: float, rule: str = "code", what: str = "gd2po") -> None:
    """ValueError naming the option, the bad value and the valid ones."""
    check_choice(f"{what}_filter", filter, GD2PO_FILTERS)
    check_choice(f"{what}_rule", rule, GD2PO_RULES)
    if isinstance(tau, bool) or not isinstance(tau, int | float) or not 0.0 <= float(tau) <= 1.0:
        raise ValueError(f"{what}_tau={tau!r} must be a number in [0, 1] (the authors' scripts use 0.8)")


@dataclass(frozen=True)
class GD2POMask:
    """Per response (bs,): ``keep`` bool, ``conflict`` bool (mixed signs), ``snr`` float64 (``s_i``),
    ``kappa`` float64 (its group's query weight), ``counted`` bool (present: not every reward missing);
    per group (G,): ``group_weight`` float64 (``kappa_g``) and ``group_counted`` bool (has a present response)."""

    keep: torch.Tensor
    conflict: torch.Tensor
    snr: torch.Tensor
    kappa: torch.Tensor
    counted: torch.Tensor
    group_weight: torch.Tensor
    group_counted: torch.Tensor


def gd2po_mask(d: Decoupled, lengths: torch.Tensor, filter: str, tau: float, rule: str = "code") -> GD2POMask:
    """Steps 2-5 of the module docstring. d: GDPO's per-reward step; lengths: (bs,) token counts."""
    check_gd2po_options(filter, tau, rule)
    u = d.adv_k * d.weights * lengths.to(torch.float64).unsqueeze(1)  # (bs, K)
    conflict = (u > SIGN_EPS).any(dim=1) & (u < -SIGN_EPS).any(dim=1)
    snr = u.sum(dim=1) / (u.abs().sum(dim=1) + SNR_EPS)
    snr = torch.nan_to_num(snr, nan=0.0)  # inf - inf from astronomically large advantages: undecided, 0
    if filter == "sign":
        keep = ~conflict if rule == "code" else ~conflict & (u != 0).any(dim=1)
    else:
        keep = ~(conflict & (snr.abs() < tau)) if rule == "code" else snr.abs() > tau
    keep = keep & d.present
    kept = torch.zeros(d.num_groups, dtype=torch.float64, device=u.device)
    kept = kept.index_add_(0, d.group, keep.to(torch.float64))
    size = torch.zeros_like(kept).index_add_(0, d.group, d.present.to(torch.float64))
    group_weight = kept / size.clamp(min=1)
    return GD2POMask(keep, conflict & d.present, snr, group_weight[d.group], d.present, group_weight, size > 0)


def gd2po_advantages(
    scores: torch.Tensor,
    uids,
    response_mask: torch.Tensor,
    weights: Sequence[float] | torch.Tensor | None = None,
    *,
    filter: str = "sign",
    tau: float = DEFAULT_TAU,
    group_reweight: bool = True,
    rule: str = "code",
    norm_by_std: bool = True,
    epsilon: float = 1e-6,
    final_norm: str = "token",
    conditions: Sequence[Condition] = (),
    offset: torch.Tensor | None = None,
) -> torch.Tensor:
    """GD2PO advantages. scores: (bs, K) raw rewards (NaN = missing); uids: (bs,) group ids; response_mask:
    (bs, T); offset: optional (bs,) term added to the summed advantage. Returns (bs, T) float32 (0 on padding)."""
    check_final_norm(final_norm)
    check_gd2po_options(filter, tau, rule)
    d = decouple(scores, uids, response_mask, weights, norm_by_std=norm_by_std, epsilon=epsilon,
                 conditions=conditions, offset=offset)  # fmt: skip
    m = gd2po_mask(d, response_mask.sum(-1), filter, tau, rule)
    adv = d.adv_k @ d.weights + d.offset
    if group_reweight:
        adv = adv * m.kappa
    return final_normalize(adv, response_mask, final_norm, include=m.keep, epsilon=epsilon)


def gd2po_metrics(
    scores: torch.Tensor,
    uids,
    response_mask: torch.Tensor,
    weights: Sequence[float] | torch.Tensor | None = None,
    *,
    filter: str = "sign",
    tau: float = DEFAULT_TAU,
    rule: str = "code",
    norm_by_std: bool = True,
    epsilon: float = 1e-6,
    conditions: Sequence[Condition] = (),
) -> dict[str, float]:
    """What GD2PO did to the batch, logged under ``gdpo/gd2po/...`` (fractions over present responses):
    conflict_frac (mixed signs), masked_frac (left out), prompt_weight/{mean,min,max} (kappa over groups with a
    present response), and for ``snr`` snr_abs_mean_in_conflict (mean |s| over the conflicting responses)."""
    d = decouple(scores, uids, response_mask, weights, norm_by_std=norm_by_std, epsilon=epsilon,
                 conditions=conditions)  # fmt: skip
    m = gd2po_mask(d, response_mask.sum(-1), filter, tau, rule)
    n = max(int(m.counted.sum()), 1)
    out = {
        "gdpo/gd2po/conflict_frac": float(m.conflict.sum()) / n,
        "gdpo/gd2po/masked_frac": float((m.counted & ~m.keep).sum()) / n,
    }
    kappa = m.group_weight[m.group_counted]
    if kappa.numel():
        out["gdpo/gd2po/prompt_weight/mean"] = kappa.mean().item()
        out["gdpo/gd2po/prompt_weight/min"] = kappa.min().item()
        out["gdpo/gd2po/prompt_weight/max"] = kappa.max().item()
    if filter == "snr":
        out["gdpo/gd2po/snr_abs_mean_in_conflict"] = m.snr[m.conflict].abs().mean().item() if m.conflict.any() else 0.0
    return out
