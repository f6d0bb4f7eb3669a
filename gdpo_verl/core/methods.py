"""The multi-reward methods as verl users select them: option names, validated settings, one dispatch, metrics.

Framework-free (configs are read through ``.get``: a dict or an OmegaConf node). Under ``algorithm``:

    adv_estimator:          gdpo | gd2po | rvpo         (gdpo_verl.core.{advantage,gd2po,rvpo})
    gdpo_reward_weighting:  none | saw                  SAW's CV weights (gdpo_verl.core.saw), adv_estimator=gdpo only
    gdpo_saw_offsets:       null | [c_1, ..., c_K]      per-reward shift before the CV (null: 0 each)
    gd2po_filter:           sign | snr                  the authors' "Hard" and "SNR" variants
    gd2po_tau:              0.8                         SNR threshold in [0, 1]
    gd2po_group_reweight:   true                        the query weight kappa
    gd2po_rule:             code | paper                the authors' code (default) or the paper's figure
    rvpo_risk:              1.0                         k > 0 of the soft minimum

Each method reuses the reward settings (keys, weights, conditions, epsilon, ``gdpo_final_norm``) of
:class:`gdpo_verl.core.contract.RewardSettings`. :func:`method_advantages` returns (bs, T) float32 advantages;
:func:`method_metrics` the method's own per-step metrics ``{name: float}`` (``gdpo/gd2po/*``, ``gdpo/saw/*``,
``gdpo/rvpo/*``; nothing for plain GDPO); :func:`response_advantages` one value per response before the batch-wise
step, under any method of :data:`METHOD_NAMES` (the distinct-advantage counts, ``gdpo/collapse/distinct_<method>``).

>>> MethodSettings.from_algorithm({"adv_estimator": "gd2po", "gd2po_filter": "snr"}, 2).gd2po_filter
'snr'
>>> MethodSettings.from_algorithm({"adv_estimator": "gd2po", "gd2po_filter": "hard"}, 2)
Traceback (most recent call last):
...
ValueError: algorithm.gd2po_filter='hard' is unknown; valid values: sign, snr
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from gdpo_verl.core.advantage import gdpo_advantages, group_index, grpo_advantages
from gdpo_verl.core.choices import check_choice
from gdpo_verl.core.contract import RewardSettings
from gdpo_verl.core.gd2po import DEFAULT_TAU, GD2PO_FILTERS, GD2PO_RULES, check_gd2po_options, gd2po_advantages
from gdpo_verl.core.gd2po import gd2po_metrics as _gd2po_metrics
from gdpo_verl.core.rvpo import check_risk, rvpo_advantages, rvpo_metrics
from gdpo_verl.core.saw import check_offsets, saw_advantages, saw_metrics

#: ``algorithm.adv_estimator`` names this project registers (all take verl's ``gdpo`` data path)
ESTIMATORS = ("gdpo", "gd2po", "rvpo")
WEIGHTINGS = ("none", "saw")
#: every method as the ``method=`` presets (recipes/method/) name it
METHOD_NAMES = ("gdpo", "gd2po", "saw", "rvpo", "grpo", "grpo_nostd")


def _get(config, key, default=None):
    value = config.get(key, default) if config is not None else default
    return default if value is None else value


@dataclass(frozen=True)
class MethodSettings:
    """Which method, with its validated options (module docstring)."""

    estimator: str = "gdpo"
    weighting: str = "none"
    saw_offsets: tuple[float, ...] | None = None
    gd2po_filter: str = "sign"
    gd2po_tau: float = DEFAULT_TAU
    gd2po_group_reweight: bool = True
    gd2po_rule: str = "code"
    rvpo_risk: float = 1.0

    @property
    def plain_gdpo(self) -> bool:
        return self.estimator == "gdpo" and self.weighting == "none"

    @classmethod
    def from_algorithm(cls, config, num_rewards: int) -> MethodSettings:
        """Read and validate the options of the module docstring; every error names the key and the fix."""
        estimator = check_choice("algorithm.adv_estimator", str(_get(config, "adv_estimator", "gdpo")), ESTIMATORS)
        weighting = check_choice(
            "algorithm.gdpo_reward_weighting", str(_get(config, "gdpo_reward_weighting", "none")), WEIGHTINGS
        )
        if weighting == "saw" and estimator != "gdpo":
            raise ValueError(
                f"algorithm.gdpo_reward_weighting=saw modifies adv_estimator=gdpo; got adv_estimator={estimator}. "
                "Use adv_estimator=gdpo with gdpo_reward_weighting=saw, or gdpo_reward_weighting=none"
            )
        raw_offsets = _get(config, "gdpo_saw_offsets", None)
        offsets = None
        if raw_offsets is not None:
            if isinstance(raw_offsets, str) or not hasattr(raw_offsets, "__len__"):
                raise ValueError(f"algorithm.gdpo_saw_offsets must be a list of numbers; got {raw_offsets!r}")
            offsets = tuple(check_offsets(list(raw_offsets), num_rewards, "algorithm.gdpo_saw_offsets"))
        gd2po_filter = str(_get(config, "gd2po_filter", "sign"))
        gd2po_rule = str(_get(config, "gd2po_rule", "code"))
        tau = _get(config, "gd2po_tau", DEFAULT_TAU)
        check_gd2po_options(gd2po_filter, tau, gd2po_rule, what="algorithm.gd2po")
        reweight = _get(config, "gd2po_group_reweight", True)
        if not isinstance(reweight, bool):
            raise ValueError(f"algorithm.gd2po_group_reweight={reweight!r} must be true or false")
        risk = check_risk(_get(config, "rvpo_risk", 1.0), "algorithm.rvpo_risk")
        return cls(estimator, weighting, offsets, gd2po_filter, float(tau), reweight, gd2po_rule, risk)


def method_advantages(
    reward: RewardSettings,
    method: MethodSettings,
    scores: torch.Tensor,
    uids,
    response_mask: torch.Tensor,
    offset: torch.Tensor | None = None,
) -> torch.Tensor:
    """scores: (bs, K) raw per-response rewards (NaN = missing); uids: (bs,); response_mask: (bs, T); offset: (bs,)
    or None (KL in reward). Returns (bs, T) float32 advantages of the selected method."""
    common = dict(
        norm_by_std=reward.norm_by_std,
        epsilon=reward.epsilon,
        final_norm=reward.final_norm,
        conditions=reward.conditions,
        offset=offset,
    )
    if method.estimator == "gd2po":
        return gd2po_advantages(scores, uids, response_mask, reward.weights, filter=method.gd2po_filter,
                                tau=method.gd2po_tau, group_reweight=method.gd2po_group_reweight,
                                rule=method.gd2po_rule, **common)  # fmt: skip
    if method.estimator == "rvpo":
        return rvpo_advantages(scores, uids, response_mask, reward.weights, risk=method.rvpo_risk, **common)
    if method.weighting == "saw":
        return saw_advantages(scores, uids, response_mask, reward.weights, offsets=method.saw_offsets, **common)
    return gdpo_advantages(scores, uids, response_mask, reward.weights, **common)


def method_metrics(
    reward: RewardSettings, method: MethodSettings, scores: torch.Tensor, uids, response_mask: torch.Tensor
) -> dict[str, float]:
    """The selected method's own per-step metrics. scores: (bs, K) raw (before conditions); uids: (bs,);
    response_mask: (bs, T). Empty for plain GDPO (its metrics are ``gdpo_verl.core.metrics``)."""
    common = dict(norm_by_std=reward.norm_by_std, epsilon=reward.epsilon, conditions=reward.conditions)
    if method.estimator == "gd2po":
        return _gd2po_metrics(scores, uids, response_mask, reward.weights, filter=method.gd2po_filter,
                              tau=method.gd2po_tau, rule=method.gd2po_rule, **common)  # fmt: skip
    if method.estimator == "rvpo":
        return rvpo_metrics(scores, uids, response_mask, reward.weights, risk=method.rvpo_risk, **common)
    if method.weighting == "saw":
        return saw_metrics(scores, reward.keys, method.saw_offsets, conditions=reward.conditions)
    return {}


def method_named(name: str, options: MethodSettings | None = None) -> MethodSettings:
    """The settings of preset ``name`` (one of :data:`METHOD_NAMES` but the GRPO ones), keeping the other options
    of ``options`` (default: every option's default)."""
    check_choice("method", name, METHOD_NAMES[:4])
    estimator, weighting = ("gdpo", "saw") if name == "saw" else (name, "none")
    return replace(options or MethodSettings(), estimator=estimator, weighting=weighting)


def response_advantages(
    name: str, reward: RewardSettings, scores: torch.Tensor, uids, options: MethodSettings | None = None
) -> torch.Tensor:
    """One advantage per response under method ``name`` (:data:`METHOD_NAMES`) BEFORE the batch-wise step (that
    step is one affine map per batch, so it cannot change which responses of a batch share a value): GD2PO's masked
    responses are 0 and its prompt weight applied, SAW's weights are over this batch. scores: (bs, K) raw rewards
    (NaN = missing); uids: (bs,). Returns (bs,) float64. ``options``: the other options (tau, offsets, risk...).

    >>> s = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [0.0, 0.0]])
    >>> r = RewardSettings(keys=("a", "b"), weights=(1.0, 1.0))
    >>> [round(v, 3) for v in response_advantages("gdpo", r, s, [0, 0, 0, 0]).tolist()]
    [0.0, 0.0, 1.732, -1.732]
    >>> [round(v, 3) for v in response_advantages("grpo", r, s, [0, 0, 0, 0]).tolist()]  # sums 1, 1, 2, 0
    [0.0, 0.0, 1.225, -1.225]
    >>> [round(v, 3) for v in response_advantages("gd2po", r, s, [0, 0, 0, 0]).tolist()]  # (1,0), (0,1): mixed signs
    [0.0, 0.0, 0.866, -0.866]
    """
    check_choice("method", name, METHOD_NAMES)
    if name in ("grpo", "grpo_nostd"):
        group, n = group_index(uids, device=scores.device)
        return grpo_advantages(reward.gate(scores.to(torch.float64)), group, n, reward.weights,
                               norm_by_std=reward.norm_by_std and name == "grpo", epsilon=reward.epsilon)  # fmt: skip
    mask = torch.ones(scores.shape[0], 1, dtype=torch.float32, device=scores.device)
    adv = method_advantages(replace(reward, final_norm="none"), method_named(name, options), scores, uids, mask)
    return adv[:, 0].to(torch.float64)


__all__ = [
    "ESTIMATORS",
    "GD2PO_FILTERS",
    "GD2PO_RULES",
    "METHOD_NAMES",
    "WEIGHTINGS",
    "MethodSettings",
    "method_advantages",
    "method_named",
    "response_advantages",
]
