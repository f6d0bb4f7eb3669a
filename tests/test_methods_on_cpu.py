"""The methods as verl users select them (gdpo_verl/core/methods.py): option validation at start-up and dispatch.

The math of each method is tested in tests/test_{gd2po,saw,rvpo}_on_cpu.py; both trainers' hooks in
tests/test_verl_glue_on_cpu.py; the presets in tests/test_recipes_on_cpu.py.
Run: .venv/bin/python -m pytest tests/test_methods_on_cpu.py -q
"""

import pytest
import torch
from helpers.compose import compose_config
from omegaconf import OmegaConf

from gdpo_verl.core.advantage import gdpo_advantages
from gdpo_verl.core.contract import RewardSettings
from gdpo_verl.core.gd2po import gd2po_advantages
from gdpo_verl.core.methods import MethodSettings, method_advantages, method_metrics
from gdpo_verl.core.rvpo import rvpo_advantages
from gdpo_verl.core.saw import saw_advantages
from gdpo_verl.main import apply_components, validate_estimator

SCORES = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [0.0, 0.0], [2.0, -3.0], [0.0, 3.0]])
UIDS = ["a"] * 4 + ["b"] * 2
MASK = (torch.arange(3) < torch.tensor([3, 2, 1, 3, 2, 3]).unsqueeze(1)).long()
REWARD = RewardSettings(keys=("format", "correctness"), weights=(1.0, 2.0), final_norm="sequence")


def settings(**options) -> MethodSettings:
    return MethodSettings.from_algorithm(options, 2)


def test_defaults_are_plain_gdpo_and_the_authors_gd2po():
    s = settings()
    assert s.plain_gdpo and (s.gd2po_filter, s.gd2po_tau, s.gd2po_group_reweight, s.gd2po_rule) == (
        "sign", 0.8, True, "code"
    )  # fmt: skip
    assert torch.equal(method_advantages(REWARD, s, SCORES, UIDS, MASK),
                       gdpo_advantages(SCORES, UIDS, MASK, REWARD.weights, final_norm="sequence"))  # fmt: skip
    assert method_metrics(REWARD, s, SCORES, UIDS, MASK) == {}


def test_dispatch_passes_every_option_through():
    common = dict(final_norm="sequence")
    s = settings(
        adv_estimator="gd2po", gd2po_filter="snr", gd2po_tau=0.3, gd2po_group_reweight=False, gd2po_rule="paper"
    )
    ref = gd2po_advantages(SCORES, UIDS, MASK, REWARD.weights, filter="snr", tau=0.3, group_reweight=False,
                           rule="paper", **common)  # fmt: skip
    assert torch.equal(method_advantages(REWARD, s, SCORES, UIDS, MASK), ref)
    assert "gdpo/gd2po/masked_frac" in method_metrics(REWARD, s, SCORES, UIDS, MASK)
    s = settings(gdpo_reward_weighting="saw", gdpo_saw_offsets=[0, 3])
    ref = saw_advantages(SCORES, UIDS, MASK, REWARD.weights, offsets=[0.0, 3.0], **common)
    assert torch.equal(method_advantages(REWARD, s, SCORES, UIDS, MASK), ref)
    assert set(method_metrics(REWARD, s, SCORES, UIDS, MASK)) == {
        f"gdpo/saw/{n}/{m}" for n in REWARD.keys for m in ("weight", "cv")
    }
    s = settings(adv_estimator="rvpo", rvpo_risk=3.0)
    ref = rvpo_advantages(SCORES, UIDS, MASK, REWARD.weights, risk=3.0, **common)
    assert torch.equal(method_advantages(REWARD, s, SCORES, UIDS, MASK), ref)
    offset = torch.tensor([0, 0, 0.5, 0, 0, 0])  # the KL term reaches every method (row 2 is kept by GD2PO)
    for s in (settings(adv_estimator="gd2po"), settings(adv_estimator="rvpo"), settings(gdpo_reward_weighting="saw")):
        raw = RewardSettings(keys=REWARD.keys, weights=REWARD.weights, final_norm="none")
        moved = method_advantages(raw, s, SCORES, UIDS, MASK, offset) - method_advantages(raw, s, SCORES, UIDS, MASK)
        assert moved[2, 0].item() == pytest.approx(0.5 if s.estimator != "gd2po" else 0.5 * 2 / 4)  # kappa = 2/4


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"adv_estimator": "gd3po"}, "algorithm.adv_estimator='gd3po' is unknown; valid values: gdpo, gd2po, rvpo"),
        ({"gdpo_reward_weighting": "cv"}, "algorithm.gdpo_reward_weighting='cv' is unknown; valid values: none, saw"),
        ({"adv_estimator": "gd2po", "gdpo_reward_weighting": "saw"}, "saw modifies adv_estimator=gdpo"),
        ({"gdpo_saw_offsets": [3.0]}, r"algorithm.gdpo_saw_offsets=\[3.0\] must be 2 finite numbers"),
        ({"gdpo_saw_offsets": "3"}, "algorithm.gdpo_saw_offsets must be a list of numbers"),
        ({"gd2po_filter": "hard"}, "algorithm.gd2po_filter='hard' is unknown; valid values: sign, snr"),
        ({"gd2po_tau": 1.5}, r"algorithm.gd2po_tau=1.5 must be a number in \[0, 1\]"),
        ({"gd2po_rule": "figure"}, "algorithm.gd2po_rule='figure' is unknown; valid values: code, paper"),
        ({"gd2po_group_reweight": "yes"}, "algorithm.gd2po_group_reweight='yes' must be true or false"),
        ({"rvpo_risk": 0}, "algorithm.rvpo_risk=0 must be a finite number > 0"),
    ],
)
def test_bad_options_name_the_key_the_value_and_the_fix(options, message):
    with pytest.raises(ValueError, match=message):
        MethodSettings.from_algorithm(OmegaConf.create(options), 2)


@pytest.mark.parametrize("method", ["gd2po", "saw", "rvpo"])
def test_start_up_validates_the_methods_options_on_the_composed_config(method):
    cfg = compose_config("toolcall", [f"method={method}"], device="gpu")
    apply_components(cfg)
    validate_estimator(cfg)  # the preset as shipped is valid
    bad = {
        "gd2po": "algorithm.gd2po_tau=2",
        "saw": "algorithm.gdpo_saw_offsets=[1,2,3]",
        "rvpo": "algorithm.rvpo_risk=-1",
    }
    cfg = compose_config("toolcall", [f"method={method}", bad[method]], device="gpu")
    apply_components(cfg)
    with pytest.raises(ValueError, match=bad[method].split("=")[0]):
        validate_estimator(cfg)


def test_module_docstring_example():
    import doctest

    import gdpo_verl.core.methods as module

    assert doctest.testmod(module).failed == 0
