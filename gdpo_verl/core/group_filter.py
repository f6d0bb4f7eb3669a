"""The keep/drop rule of GDPO's group filter (dynamic sampling that sees every reward): pure, vectorized, torch only.

verl's DAPO filter drops a prompt's group when ONE metric (the summed reward, or one named entry) is identical
across the group. Under GDPO each component is normalized on its own, so a group whose total is constant can still
carry signal in its components (e.g. format (1,0) and correctness (0,1) trade places). :func:`classify_groups`
keeps a group when ANY component varies inside it:

    reason                  kept  meaning
    kept_total_varies       yes   the weighted total varies (a filter on the total keeps it too)
    kept_any_component      yes   the total is constant but at least one component varies (kept only by this rule)
    dropped_all_constant    no    every component is constant over the group's present values
    kept_singleton          yes   fewer than 2 responses: never filtered (as in verl)

A missing value (NaN; None upstream) abstains: it is ignored by the variation check, and a component with at most
one present value in a group counts as constant there. Used by :mod:`gdpo_verl.verl_glue.replay_buffer`; tested in
``tests/test_replay_buffer_on_cpu.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from gdpo_verl.core.advantage import constant_groups, group_index, weighted_total

KEPT_TOTAL_VARIES = "kept_total_varies"
KEPT_ANY_COMPONENT = "kept_any_component"
DROPPED_ALL_CONSTANT = "dropped_all_constant"
KEPT_SINGLETON = "kept_singleton"
REASONS = (KEPT_TOTAL_VARIES, KEPT_ANY_COMPONENT, DROPPED_ALL_CONSTANT, KEPT_SINGLETON)


@dataclass(frozen=True)
class GroupVerdict:
    """Per group (in order of first appearance of its uid): ``uids``, ``keep`` (bool), ``reason`` (index into
    :data:`REASONS`) and ``total`` (the weighted total of the group's first response, NaN-as-0; the value a dropped
    group collapses to)."""

    uids: np.ndarray
    keep: np.ndarray
    reason: np.ndarray
    total: np.ndarray


def classify_groups(scores: torch.Tensor, uids, weights: Sequence[float]) -> GroupVerdict:
    """scores: (bs, K) per-response components (after conditions), NaN = missing; uids: (bs,) group ids."""
    scores = scores.to(torch.float64).cpu()
    if scores.dim() != 2 or scores.shape[1] != len(weights):
        raise ValueError(f"scores must be (bs, K={len(weights)}); got {tuple(scores.shape)}")
    group, n = group_index(np.asarray(uids, dtype=object))
    valid = ~torch.isnan(scores)
    total = weighted_total(scores, [float(x) for x in weights])
    component_constant = constant_groups(scores, valid, group, n).all(dim=1)
    total_constant = constant_groups(total[:, None], torch.ones_like(total[:, None], dtype=torch.bool), group, n)[:, 0]
    size = torch.bincount(group, minlength=n)
    reason = torch.where(
        size < 2,
        REASONS.index(KEPT_SINGLETON),
        torch.where(
            component_constant,
            REASONS.index(DROPPED_ALL_CONSTANT),
            torch.where(total_constant, REASONS.index(KEPT_ANY_COMPONENT), REASONS.index(KEPT_TOTAL_VARIES)),
        ),
    )
    first = torch.full((n,), len(group), dtype=torch.int64).scatter_reduce(0, group, torch.arange(len(group)), "amin")
    uid_array = np.asarray(uids, dtype=object)
    return GroupVerdict(
        uids=uid_array[first.numpy()],
        keep=(reason != REASONS.index(DROPPED_ALL_CONSTANT)).numpy(),
        reason=reason.numpy(),
        total=total[first].numpy(),
    )
