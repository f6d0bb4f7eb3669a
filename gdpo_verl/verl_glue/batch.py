"""Reading the project's fields out of verl's batches: per-reward step metrics, and one value per agent session.

Used by both trainers' hooks (``v1``, ``legacy``). Records are decoded with ``gdpo_verl.core.contract``; the
statistics are ``gdpo_verl.core.metrics``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from gdpo_verl import estimator
from gdpo_verl.core.contract import ERROR_PREFIX, FLAG_PREFIXES, NONFINITE_PREFIX, RewardSettings, split_row_keys
from gdpo_verl.core.methods import MethodSettings, method_metrics
from gdpo_verl.core.metrics import collapse_metrics, step_metrics
from gdpo_verl.verl_glue.checks import check_keys_returned


def record_keys(keys) -> list[str]:
    """The ``reward_extra_info`` keys of components ``keys``: their values and their flags."""
    return [*keys, *(prefix + k for prefix in FLAG_PREFIXES for k in keys)]


def reward_metrics(data, settings: RewardSettings, method: MethodSettings | None = None) -> dict[str, float]:
    """Per-reward step metrics of one DataProto: scores from ``token_level_scores_<name>`` (else the scalar columns),
    uids, data sources and the manager's error flags from ``non_tensor_batch``; with ``method``, that method's own
    metrics too (``gdpo_verl.core.methods.method_metrics``, on ``batch["response_mask"]``), and the distinct-advantage
    counts under every method (``gdpo_verl.core.metrics.collapse_metrics``, with ``method``'s options)."""
    batch, columns = data.batch, data.non_tensor_batch
    uids = columns.get("uid")
    if uids is None or not len(uids):
        return {}
    check_keys_returned(columns, settings.keys)
    scores = estimator.collect_scores(settings.keys, batch, columns, len(uids), "cpu").cpu()
    out = step_metrics(
        settings.gate(scores),
        np.asarray(uids, dtype=object),
        settings.keys,
        settings.weights,
        norm_by_std=settings.norm_by_std,
        epsilon=settings.epsilon,
        data_source=columns.get("data_source"),
        errors={k: columns[ERROR_PREFIX + k] for k in settings.keys if ERROR_PREFIX + k in columns},
        nonfinite={k: columns[NONFINITE_PREFIX + k] for k in settings.keys if NONFINITE_PREFIX + k in columns},
    )
    out.update(collapse_metrics(settings, scores, np.asarray(uids, dtype=object), method))
    if method is not None and "response_mask" in batch.keys():
        mask = batch["response_mask"].cpu()
        out.update(method_metrics(settings, method, scores, np.asarray(uids, dtype=object), mask))
    return out


def session_final_rows(keys) -> tuple[np.ndarray, np.ndarray]:
    """verl's V1 row keys ``{uid}_{session}_{index}`` -> (rows holding each session's final output, and for every row
    the position of its session in the first array). verl's GRPO counts one value per session this way.

    >>> session_final_rows(["a_0_0", "a_0_1", "a_1_0", "b_0_0"])
    (array([1, 2, 3]), array([0, 0, 1, 2]))
    """
    _, session, index = split_row_keys(keys)
    frame = pd.DataFrame({"session": session, "index": index, "row": np.arange(len(session))})
    final = frame.sort_values(["session", "index"]).groupby("session", sort=False).tail(1).sort_values("row")
    position = pd.Series(np.arange(len(final)), index=final["session"].to_numpy())
    return final["row"].to_numpy(), position.loc[session].to_numpy()
