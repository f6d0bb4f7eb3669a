"""The reward contract: one record per component and sample, its names, its codec, and the settings of every stage.

Every stage of the data path speaks this module's language (README "Data flow"):

    reward functions -> manager (``ComponentValue`` per component, :func:`encode_sample` -> ``reward_extra_info``)
    -> rollout workers (:func:`decode_scores` -> ``token_level_scores_<name>`` tensors, ``core.token_scores``)
    -> V1 sampler (:func:`decode_scores` for its group filter) -> estimator and metrics (:class:`RewardSettings`:
    :meth:`~RewardSettings.gate`, :meth:`~RewardSettings.total`, the group and final steps).

Names (``reward_extra_info`` keys and batch fields), per component ``<name>``:
    <name>                        the raw score, a float; NaN = the component abstains for the sample
    gdpo_error_<name>             1.0 when its call failed (under ``on_error: nan``), else 0.0
    gdpo_nonfinite_<name>         1.0 when it returned inf/NaN (also an error), else 0.0
    gdpo_missing_<name>           1.0 when its dict result lacked the component's key, else 0.0
    gdpo_tokens_<name>            a process reward's per-token values (a list; taken out once placed in the tensor)
    token_level_scores_<name>     the batch field, float32 (bs, T) (layout: ``gdpo_verl.core.token_scores``)

Framework-free: torch, numpy and pandas only; configs are read through ``.get`` (a dict or an OmegaConf node).

>>> record = encode_sample({"format": ComponentValue(1.0), "answer": ComponentValue(error="timed out")})
>>> record["format"], record["gdpo_error_answer"], math.isnan(record["answer"])
(1.0, 1.0, True)
>>> decode_scores([record, {"format": 0.0}], ["format", "answer"]).tolist()
[[1.0, nan], [0.0, nan]]
>>> s = RewardSettings(keys=("fmt", "len"), weights=(1.0, 2.0), conditions=(Condition(1, 0, 1.0),))
>>> s.total(torch.tensor([[1.0, 0.5], [0.0, 0.5]])).tolist()   # len counts only where fmt >= 1
[2.0, 0.0]
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from gdpo_verl.core.advantage import FINAL_NORMS, Condition, apply_conditions, weighted_total
from gdpo_verl.core.choices import check_choice, clipped, first_of, real_number, yaml_on

#: the verl registry names of this project's reward manager and advantage estimator
MANAGER_NAME = "gdpo_multi"
ESTIMATOR_NAME = "gdpo"

SCORE_PREFIX = "token_level_scores_"
TOKENS_PREFIX = "gdpo_tokens_"
ERROR_PREFIX = "gdpo_error_"
NONFINITE_PREFIX = "gdpo_nonfinite_"
MISSING_PREFIX = "gdpo_missing_"
FLAG_PREFIXES = (ERROR_PREFIX, NONFINITE_PREFIX, MISSING_PREFIX)
#: names a component cannot take: verl's per-sample batch keys, and the prefixes above
RESERVED_NAMES = frozenset(
    "uid data_source reward_model extra_info index raw_prompt prompts responses response_mask attention_mask "
    "input_ids position_ids rm_scores token_level_scores token_level_rewards advantages returns old_log_probs "
    "ref_log_prob values extra_fields reward_extra_info score acc __num_turns__ multi_modal_inputs".split()
)
RESERVED_PREFIXES = (*FLAG_PREFIXES, TOKENS_PREFIX, SCORE_PREFIX)
#: the largest weight magnitude: normalized advantages stay below sqrt(group size), so a weighted sum of K of them
#: stays below K * MAX_WEIGHT * sqrt(n), far inside float32 (3.4e38) for any real K and group size n
MAX_WEIGHT = 1e6
WEIGHT_BOUND_WHY = " (weighted sums of normalized advantages must fit float32; rescale the other weights instead)"
#: the estimator's backends: fast (vectorized) | verl (each reward literally through verl's GRPO; the test oracle)
BACKENDS = ("fast", "verl")


def field_name(name: str) -> str:
    """The batch field of component ``name``: ``token_level_scores_<name>``."""
    return SCORE_PREFIX + name


@dataclass(frozen=True)
class ComponentValue:
    """One component's value on one sample: ``value`` (NaN = abstain), or why it has none."""

    value: float = math.nan
    error: str | None = None
    nonfinite: bool = False
    missing_from: tuple[str, ...] | None = None  # the keys of a dict result that lacked the component's key
    tokens: tuple[float, ...] | None = None  # a process reward's per-token values (``value`` is their sum)


def encode_sample(values: Mapping[str, ComponentValue]) -> dict:
    """{component: ComponentValue} -> the sample's ``reward_extra_info``: every key on every sample (verl takes the
    key set from the first sample) but ``gdpo_tokens_<name>``, which only a process reward's samples carry."""
    record: dict = {}
    for name, got in values.items():
        record[name] = got.value
        if got.tokens is not None:
            record[TOKENS_PREFIX + name] = list(got.tokens)
        record[ERROR_PREFIX + name] = float(got.error is not None)
        record[NONFINITE_PREFIX + name] = float(got.nonfinite)
        record[MISSING_PREFIX + name] = float(got.missing_from is not None)
    return record


def without_token_lists(record: Mapping) -> dict:
    """``reward_extra_info`` without the per-token lists (they travel in the tensors; verl's per-key numpy
    stacking and validation means need one scalar per key)."""
    return {k: v for k, v in record.items() if not str(k).startswith(TOKENS_PREFIX)}


NUMERIC_KINDS = ("floating", "integer", "mixed-integer-float", "decimal", "empty")


def numeric_column(values, where: str, n: int | None = None) -> np.ndarray:
    """(n,) float64 from per-sample values: numbers, None or NaN (missing). Anything else (a string, a list, a
    bool-like object) raises a ValueError naming ``where`` and the value; non-finite numbers stay as they are."""
    array = np.asarray(values) if not isinstance(values, (list, tuple)) else np.asarray(values, dtype=object)
    if array.ndim != 1 or (n is not None and array.shape != (n,)):
        expected = f"({n},)" if n is not None else "(n,)"
        raise ValueError(f"{where} must have shape {expected} (one value per response); got {array.shape}")
    if array.dtype.kind in "biuf":
        return array.astype(np.float64)
    kind = pd.api.types.infer_dtype(array, skipna=True)
    if kind not in NUMERIC_KINDS:
        bad = next(
            (v for v in array.tolist() if v is not None and not isinstance(v, numbers.Real) or isinstance(v, bool)),
            None,
        )
        raise ValueError(f"{where} must hold numbers or None; found {type(bad).__name__} {bad!r} ({kind} values)")
    return pd.to_numeric(pd.Series(array, dtype=object), errors="coerce").to_numpy(dtype=np.float64)


def decode_columns(records: Sequence[Mapping | None], keys: Sequence[str]) -> dict[str, np.ndarray]:
    """Per-sample ``reward_extra_info`` records -> {key: (n,) float64}; a record or key that is absent is NaN.
    A value that is not a number raises a ValueError naming the key (see :func:`numeric_column`)."""
    rows = [r if isinstance(r, Mapping) else {} for r in records]
    frame = pd.DataFrame.from_records(rows, columns=list(keys), index=range(len(rows)))
    return {k: numeric_column(frame[k].to_numpy(dtype=object), f"reward_extra_info[{k!r}]", len(rows)) for k in keys}


def decode_scores(records: Sequence[Mapping | None], names: Sequence[str]) -> torch.Tensor:
    """(n, K) float64 scores of components ``names`` from per-sample records (NaN = abstain)."""
    columns = decode_columns(records, names)
    if not names:
        return torch.zeros(len(records), 0, dtype=torch.float64)
    return torch.from_numpy(np.stack([columns[k] for k in names], axis=1))


def split_row_keys(keys: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """verl V1 row keys ``{uid}_{session}_{index}`` -> (uid, ``{uid}_{session}``, index) arrays of length n.

    >>> [a.tolist() for a in split_row_keys(["u-1_0_0", "u-1_0_1"])]
    [['u-1', 'u-1'], ['u-1_0', 'u-1_0'], [0, 1]]
    """
    parts = pd.Series(list(keys), dtype=object).str.rsplit("_", n=2, expand=True)
    if len(keys) and (parts.shape[1] != 3 or parts.isna().any().any() or not parts[2].str.isdigit().all()):
        raise ValueError(f"V1 row keys must look like '{{uid}}_{{session}}_{{index}}'; got {list(keys)[:3]}")
    if not len(keys):
        empty = np.array([], dtype=object)
        return empty, empty, np.array([], dtype=np.int64)
    return (
        parts[0].to_numpy(dtype=object),
        (parts[0] + "_" + parts[1]).to_numpy(dtype=object),
        parts[2].astype(np.int64).to_numpy(),
    )


def _get(config, key, default=None):
    value = config.get(key, default) if config is not None else default
    return default if value is None else value


@dataclass(frozen=True)
class RewardSettings:
    """The reward components as every stage after the manager sees them: names, weights, conditions, and the
    estimator's options. Built from ``algorithm.gdpo_*`` (:meth:`from_algorithm`) or from ``reward.gdpo``
    (``gdpo_verl.components.RewardSpec.settings``)."""

    keys: tuple[str, ...]
    weights: tuple[float, ...]
    conditions: tuple[Condition, ...] = ()
    final_norm: str = "token"
    backend: str = "fast"
    epsilon: float = 1e-6
    norm_by_std: bool = True

    def gate(self, scores: torch.Tensor) -> torch.Tensor:
        """(n, K) raw scores -> (n, K) after the conditions (paper Eq. 8)."""
        return apply_conditions(scores, self.conditions)

    def total(self, scores: torch.Tensor) -> torch.Tensor:
        """(n, K) raw scores -> (n,) float64 ``sum_k w_k r_k`` after the conditions, missing counting 0: the
        reward the GRPO baseline normalizes (and the manager's ``reward_score``)."""
        return weighted_total(self.gate(scores.to(torch.float64)), self.weights)

    @classmethod
    def from_algorithm(cls, config) -> RewardSettings:
        """Read and validate ``algorithm.gdpo_*``; every error names the key, the bad value and the fix."""
        keys = list(_get(config, "gdpo_reward_keys", []))
        if not keys:
            raise ValueError(
                "adv_estimator=gdpo needs at least one reward component: set algorithm.gdpo_reward_keys "
                "(e.g. '+algorithm.gdpo_reward_keys=[format,correctness]') or declare reward.gdpo.components"
            )
        if any(not isinstance(k, str) or not k for k in keys) or len(set(keys)) != len(keys):
            raise ValueError(f"algorithm.gdpo_reward_keys must be distinct non-empty names; got {first_of(keys)}")
        raw_weights = _get(config, "gdpo_reward_weights", None)
        if raw_weights is not None and (isinstance(raw_weights, str) or not hasattr(raw_weights, "__len__")):
            raise ValueError(f"algorithm.gdpo_reward_weights must be a list of numbers; got {clipped(raw_weights)}")
        weights = (
            [1.0] * len(keys)
            if raw_weights is None
            else [
                real_number(w, f"algorithm.gdpo_reward_weights[{i}]", at_most=MAX_WEIGHT, why=WEIGHT_BOUND_WHY)
                for i, w in enumerate(raw_weights)
            ]
        )
        if len(weights) != len(keys):
            raise ValueError(
                f"algorithm.gdpo_reward_weights has {len(weights)} values {first_of(weights)} but gdpo_reward_keys "
                f"has {len(keys)} names {first_of(keys)}; give one weight per key (or none for equal weights)"
            )
        conditions = []
        for target, spec in dict(_get(config, "gdpo_reward_conditions", {})).items():
            spec = yaml_on(dict(spec)) if isinstance(spec, Mapping) else spec
            on = spec.get("on") if isinstance(spec, dict) else None
            if target not in keys or on not in keys or on == target:
                raise ValueError(
                    f"algorithm.gdpo_reward_conditions[{clipped(target)}] = {clipped(spec)} must name two different "
                    f"components from gdpo_reward_keys {first_of(keys)} "
                    "(form: {<component>: {on: <other component>, threshold: <float>}})"
                )
            threshold = real_number(
                spec.get("threshold", 0.0), f"algorithm.gdpo_reward_conditions[{target!r}].threshold"
            )
            conditions.append(Condition(keys.index(target), keys.index(on), threshold))
        return cls(
            keys=tuple(keys),
            weights=tuple(weights),
            conditions=tuple(conditions),
            final_norm=check_choice(
                "algorithm.gdpo_final_norm", str(_get(config, "gdpo_final_norm", "token")), FINAL_NORMS
            ),
            backend=check_choice("algorithm.gdpo_backend", str(_get(config, "gdpo_backend", "fast")), BACKENDS),
            epsilon=real_number(_get(config, "gdpo_epsilon", 1e-6), "algorithm.gdpo_epsilon", positive=True),
            norm_by_std=bool(_get(config, "norm_adv_by_std_in_grpo", True)),
        )

    def names_components_of(self, config) -> bool:
        """Whether ``algorithm`` config ``config`` names exactly these components (``gdpo_reward_keys``)."""
        return config is not None and list(_get(config, "gdpo_reward_keys", []) or []) == list(self.keys)
