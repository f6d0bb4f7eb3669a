"""Per-step GDPO metrics: per-component reward statistics, contributions, errors, and the collapse count.

Computed by the trainer glue (``gdpo_verl.verl_glue``) on each batch (cheap: (bs, K) tensors only) and logged
through verl's tracking (console, file, tensorboard, wandb) under ``gdpo/...``:
    gdpo/<name>/{mean,std,min,max}       raw score over non-missing samples
    gdpo/<name>/missing_frac             fraction of samples where the component abstained (NaN)
    gdpo/<name>/zero_var_group_frac      fraction of groups (>= 2 values) where it has zero variance
    gdpo/learning_signal_frac            fraction of groups (>= 2 values of some component) where at least one
                                         component varies; 0: every advantage is 0, the step teaches nothing
    gdpo/<name>/contribution             mean |w_k * A_k| over samples (its share of the summed advantage)
    gdpo/<name>/errors                   reward-function failures counted under on_error=nan
    gdpo/<name>/nonfinite                non-finite values (returned inf/NaN, or +-inf in the batch): abstained
    gdpo/source/<data_source>/<name>/mean
    gdpo/collapse/distinct_gdpo          distinct per-response advantages (rounded to 1e-4) under GDPO ...
    gdpo/collapse/distinct_grpo          ... and under GRPO on the same rewards (sum first), same batch
    gdpo/collapse/distinct_{gd2po,saw,rvpo}  ... and under each other method, same batch (:func:`collapse_metrics`)
    gdpo/zero_advantage_step             1.0 when every advantage is 0 although a component varies inside a group
                                         (weights or epsilon cancel the signal; also a warning in the log)
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np
import torch

from gdpo_verl.core.advantage import constant_groups, group_index, group_normalize, grpo_advantages, weight_vector
from gdpo_verl.core.contract import RewardSettings
from gdpo_verl.core.methods import MethodSettings, response_advantages

logger = logging.getLogger(__name__)


def distinct_values(values: torch.Tensor, decimals: int = 4) -> int:
    """Number of distinct entries of ``values`` (any shape) after rounding to ``decimals``."""
    return int(torch.unique(torch.round(values.to(torch.float64), decimals=decimals)).numel())


def step_metrics(
    scores: torch.Tensor,
    uids,
    names: Sequence[str],
    weights: Sequence[float],
    *,
    norm_by_std: bool = True,
    epsilon: float = 1e-6,
    data_source=None,
    errors: dict[str, np.ndarray] | None = None,
    nonfinite: dict[str, np.ndarray] | None = None,
) -> dict[str, float]:
    """scores: (bs, K) raw (after conditions), NaN = missing; uids: (bs,); data_source: (bs,) or None."""
    scores = scores.to(torch.float64).cpu()
    infinite = torch.isinf(scores)
    scores = torch.where(infinite, torch.nan, scores)  # non-finite values abstain, as in the estimator
    valid = ~torch.isnan(scores)
    group, n = group_index(uids)
    adv_k = group_normalize(scores, group, n, norm_by_std=norm_by_std, epsilon=epsilon)
    w = weight_vector(list(weights), scores)
    counts = torch.zeros(n, len(names), dtype=torch.float64).index_add_(0, group, valid.to(torch.float64))
    flat_constant = constant_groups(scores, valid, group, n)
    out: dict[str, float] = {}
    for k, name in enumerate(names):
        v = scores[valid[:, k], k]
        if v.numel():
            out[f"gdpo/{name}/mean"] = v.mean().item()
            out[f"gdpo/{name}/std"] = v.std(unbiased=False).item()
            out[f"gdpo/{name}/min"] = v.min().item()
            out[f"gdpo/{name}/max"] = v.max().item()
        out[f"gdpo/{name}/missing_frac"] = 1.0 - valid[:, k].double().mean().item()
        multi = counts[:, k] >= 2
        out[f"gdpo/{name}/zero_var_group_frac"] = (flat_constant[:, k] & multi).sum().item() / max(int(multi.sum()), 1)
        out[f"gdpo/{name}/contribution"] = (w[k] * adv_k[:, k]).abs().mean().item()
        if errors is not None and name in errors:
            out[f"gdpo/{name}/errors"] = float(np.nansum(np.asarray(errors[name], dtype=np.float64)))
        flagged = np.nansum(np.asarray(nonfinite[name], dtype=np.float64)) if nonfinite and name in nonfinite else 0.0
        out[f"gdpo/{name}/nonfinite"] = float(flagged) + float(infinite[:, k].sum())
    if data_source is not None:
        labels = np.asarray(data_source, dtype=object).astype(str)
        codes, num_sources = group_index(labels)
        for i in range(num_sources):
            rows = codes == i
            source = labels[int(rows.nonzero()[0, 0])]
            for k, name in enumerate(names):
                v = scores[rows & valid[:, k], k]
                if v.numel():
                    out[f"gdpo/source/{source}/{name}/mean"] = v.mean().item()
    multi_all = counts >= 2  # (n, K)
    varies = (multi_all & ~flat_constant).any(dim=1)
    out["gdpo/learning_signal_frac"] = varies.sum().item() / max(int(multi_all.any(dim=1).sum()), 1)
    gdpo = adv_k @ w
    # a component varies inside some group, yet every advantage is 0 (or not finite): the weights or epsilon
    # cancel the signal. A misconfiguration, not a result: counted and warned about loudly.
    varies = bool((~flat_constant & (counts >= 2)).any())
    dead = varies and not bool((torch.isfinite(gdpo) & (gdpo != 0)).any())
    out["gdpo/zero_advantage_step"] = float(dead)
    if dead:
        logger.warning(
            "GDPO: every advantage of this step is 0 although rewards %s vary inside groups; nothing is learned. "
            "Check the weights %s and algorithm.gdpo_epsilon=%g (metric gdpo/zero_advantage_step)",
            [name for k, name in enumerate(names) if bool((~flat_constant[:, k] & (counts[:, k] >= 2)).any())],
            list(weights),
            epsilon,
        )
    grpo = grpo_advantages(scores, group, n, w, norm_by_std=norm_by_std, epsilon=epsilon)
    out["gdpo/collapse/distinct_gdpo"] = float(distinct_values(gdpo))
    out["gdpo/collapse/distinct_grpo"] = float(distinct_values(grpo))
    return out


#: the methods :func:`collapse_metrics` counts; gdpo and grpo are counted by :func:`step_metrics`
COLLAPSE_METHODS = ("gd2po", "saw", "rvpo")


def collapse_metrics(
    reward: RewardSettings, scores: torch.Tensor, uids, options: MethodSettings | None = None
) -> dict[str, float]:
    """``gdpo/collapse/distinct_<m>`` for m in :data:`COLLAPSE_METHODS`: distinct per-response advantages of this
    batch under each method (before the batch-wise step, rounded to 1e-4), with the run's options (``options``:
    tau, offsets, risk; the defaults when None, as in a GRPO run). scores: (bs, K) raw (before conditions).
    A method that refuses the run's settings (RVPO needs positive weights) has no count: the run's own method was
    validated at start-up, and a comparison count must never stop a run."""
    out = {}
    for m in COLLAPSE_METHODS:
        try:
            adv = response_advantages(m, reward, scores, uids, options)
        except ValueError:
            continue
        out[f"gdpo/collapse/distinct_{m}"] = float(distinct_values(adv))
    return out
