"""The reward contract (gdpo_verl.core.contract): one codec and one settings object for every stage.

Run: python -m pytest tests/test_contract_on_cpu.py
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from gdpo_verl.components import parse_spec
from gdpo_verl.core.advantage import Condition
from gdpo_verl.core.contract import (
    ERROR_PREFIX,
    MISSING_PREFIX,
    NONFINITE_PREFIX,
    TOKENS_PREFIX,
    ComponentValue,
    RewardSettings,
    decode_columns,
    decode_scores,
    encode_sample,
    numeric_column,
    split_row_keys,
)

NAN = math.nan


def test_every_key_on_every_sample_and_the_codec_round_trips():
    values = {
        "fmt": ComponentValue(1.0),
        "ans": ComponentValue(error="boom"),
        "len": ComponentValue(missing_from=("other",)),
        "inf": ComponentValue(error="returned inf", nonfinite=True),
        "steps": ComponentValue(0.75, tokens=(0.5, 0.25)),
    }
    record = encode_sample(values)
    assert set(record) == {
        *values,
        *(p + n for p in (ERROR_PREFIX, NONFINITE_PREFIX, MISSING_PREFIX) for n in values),
        TOKENS_PREFIX + "steps",
    }
    assert record[ERROR_PREFIX + "ans"] == 1.0 and record[ERROR_PREFIX + "fmt"] == 0.0
    assert record[MISSING_PREFIX + "len"] == 1.0 and record[NONFINITE_PREFIX + "inf"] == 1.0
    assert record[TOKENS_PREFIX + "steps"] == [0.5, 0.25]
    decoded = decode_scores([record], list(values)).tolist()[0]
    assert decoded[0] == 1.0 and decoded[4] == 0.75 and all(math.isnan(v) for v in decoded[1:4])


def test_decoding_absent_records_keys_and_nones_abstains():
    scores = decode_scores([None, {}, {"a": None, "b": 2}, {"a": np.float32(0.5), "b": 3}], ["a", "b"])
    assert scores.dtype == torch.float64 and scores.shape == (4, 2)
    assert torch.equal(torch.isnan(scores), torch.tensor([[True, True], [True, True], [True, False], [False, False]]))
    assert scores[3].tolist() == [0.5, 3.0]
    assert decode_scores([], ["a"]).shape == (0, 1) and decode_scores([{}], []).shape == (1, 0)


@pytest.mark.parametrize("bad", ["1.0", [1.0], {"x": 1}, object(), True])
def test_decoding_a_value_that_is_not_a_number_names_the_key(bad):
    with pytest.raises(ValueError, match=r"reward_extra_info\['b'\] must hold numbers or None; found"):
        decode_columns([{"b": 1.0}, {"b": bad}], ["b"])


def test_numeric_column_shapes_and_kinds():
    assert numeric_column(np.array([1, 2]), "x", 2).tolist() == [1.0, 2.0]
    assert np.isnan(numeric_column(np.array([None, 1.5], dtype=object), "x", 2)[0])
    with pytest.raises(ValueError, match=r"x must have shape \(3,\).*got \(2,\)"):
        numeric_column(np.zeros(2), "x", 3)
    with pytest.raises(ValueError, match=r"x must have shape"):
        numeric_column(np.zeros((2, 2)), "x")


def test_row_keys_split_once_for_sessions_and_uids():
    uids, sessions, index = split_row_keys(["a_b-c_0_1", "a_b-c_0_0", "z_3_0"])
    assert uids.tolist() == ["a_b-c", "a_b-c", "z"]  # an underscore inside the uid stays in the uid
    assert sessions.tolist() == ["a_b-c_0", "a_b-c_0", "z_3"] and index.tolist() == [1, 0, 0]
    for bad in (["nounderscore"], ["a_0_x"]):
        with pytest.raises(ValueError, match="must look like"):
            split_row_keys(bad)
    assert [len(a) for a in split_row_keys([])] == [0, 0, 0]


def test_settings_gate_and_total_are_the_one_weighted_sum():
    s = RewardSettings(keys=("c", "l"), weights=(1.0, 0.5), conditions=(Condition(1, 0, 1.0),))
    scores = torch.tensor([[1.0, 1.0], [0.0, 1.0], [NAN, 1.0], [1.0, NAN]])
    gated = s.gate(scores)
    assert gated[1, 1] == 0.0 and math.isnan(gated[2, 1])  # undecidable condition: missing
    assert s.total(scores).tolist() == [1.5, 0.0, 0.0, 1.0]  # missing counts 0


def test_settings_from_the_components_or_from_the_algorithm_config():
    spec = parse_spec(
        {
            "components": [
                {"name": "c", "path": "math", "fn": "sqrt", "weight": 2.0},
                {"name": "l", "path": "math", "fn": "sqrt", "condition": {"on": "c", "threshold": 1.0}},
            ]
        }
    )
    own = spec.settings()
    assert own.keys == ("c", "l") and own.weights == (2.0, 1.0) and own.conditions == (Condition(1, 0, 1.0),)
    algo = OmegaConf.create({"gdpo_reward_keys": ["c", "l"], "gdpo_reward_weights": [3.0, 1.0]})
    assert spec.settings(algo).weights == (3.0, 1.0) and spec.settings(algo).conditions == ()
    other = OmegaConf.create({"gdpo_reward_keys": ["x"], "gdpo_reward_weights": [3.0]})
    assert spec.settings(other) == own  # a config about other components does not apply


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"gdpo_reward_keys": []}, "needs at least one reward component"),
        ({"gdpo_reward_keys": ["a", "a"]}, "distinct non-empty names"),
        ({"gdpo_reward_weights": [1.0]}, "has 1 values .* but gdpo_reward_keys has 2"),
        ({"gdpo_reward_weights": "1,2"}, "must be a list of numbers"),
        ({"gdpo_reward_weights": [1.0, float("inf")]}, r"gdpo_reward_weights\[1\]=inf must be a finite number"),
        ({"gdpo_reward_conditions": {"a": {"on": "a"}}}, "must name two different components"),
        ({"gdpo_final_norm": "tokens"}, "gdpo_final_norm='tokens' is unknown; valid values: token, sequence, none"),
        ({"gdpo_backend": "slow"}, "valid values: fast, verl"),
        ({"gdpo_epsilon": 0.0}, "gdpo_epsilon=0.0 must be a positive number"),
    ],
)
def test_algorithm_settings_errors_name_the_key_and_the_fix(overrides, message):
    config = {"gdpo_reward_keys": ["a", "b"], **overrides}
    with pytest.raises(ValueError, match=message):
        RewardSettings.from_algorithm(OmegaConf.create(config))
