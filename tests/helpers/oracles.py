"""Independent oracles for the tests: verl's own GRPO (its Python loop) on the weighted sum of the rewards."""

from __future__ import annotations

import numpy as np
import torch


def verl_grpo_on_sum(scores, uids, weights=None, *, norm_by_std: bool = True, epsilon: float = 1e-6) -> torch.Tensor:
    """GRPO baseline through ``verl.trainer.ppo.core_algos.compute_grpo_outcome_advantage``: scores (bs, K) with
    NaN counted 0, summed with ``weights``; returns (bs,) float32, one advantage per response."""
    from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage

    scores = torch.as_tensor(scores, dtype=torch.float64)
    w = torch.ones(scores.shape[1], dtype=torch.float64) if weights is None else torch.as_tensor(weights).double()
    total = (torch.nan_to_num(scores) @ w).to(torch.float32)
    adv, _ = compute_grpo_outcome_advantage(
        token_level_rewards=total.unsqueeze(-1),
        response_mask=torch.ones(len(total), 1),
        index=np.asarray(list(uids), dtype=object),
        epsilon=epsilon,
        norm_adv_by_std_in_grpo=norm_by_std,
    )
    return adv[:, 0]
