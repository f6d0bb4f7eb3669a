"""The ``gdpo_multi`` reward manager on real DataProto batches (demo tokenizer), and inside a Ray actor.

Run: .venv/bin/python -m pytest tests/test_manager_on_cpu.py
"""

import asyncio
import math
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf
from verl import DataProto

from gdpo_verl.demo.tokenizer import build_tokenizer
from gdpo_verl.manager import ERROR_PREFIX, MultiRewardManager, RewardFunctionError

FUNCS = textwrap.dedent(
    """
    import time
    CALLS = []

    def shared(data_source, solution_str, ground_truth, extra_info=None):
        CALLS.append(solution_str)
        out = {"format": float(solution_str.startswith("<a>"))}
        if data_source == "math":  # mixed data sources: only math has a correctness entry
            out["correctness"] = float(ground_truth in solution_str)
        return out

    def length(solution_str, limit):
        return float(len(solution_str) <= limit)

    def broken(solution_str):
        raise RuntimeError("boom")

    def slow(solution_str):
        time.sleep(5)
        return 1.0
    """
)


@pytest.fixture(scope="module")
def tokenizer():
    return build_tokenizer()


@pytest.fixture()
def rewards_module(tmp_path, monkeypatch):
    (tmp_path / "mr_rewards.py").write_text(FUNCS)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("mr_rewards", None)
    yield "mr_rewards"
    sys.modules.pop("mr_rewards", None)


def make_config(components, on_error="raise", timeout_s=30):
    return OmegaConf.create(
        {
            "trainer": {"experiment_name": "t"},
            "reward": {"gdpo": {"on_error": on_error, "timeout_s": timeout_s, "components": components}},
        }
    )


def make_batch(tokenizer, responses, sources, truths, prompt="3+4="):
    """One DataProto row per response, laid out like verl's agent loop output (left-padded prompt)."""
    p = tokenizer(prompt)["input_ids"]
    rows = [tokenizer(r)["input_ids"] for r in responses]
    t = max(len(r) for r in rows) + 2
    resp = torch.zeros(len(rows), t, dtype=torch.int64)
    attn = torch.zeros(len(rows), len(p) + t, dtype=torch.int64)
    for i, r in enumerate(rows):
        resp[i, : len(r)] = torch.tensor(r)
        attn[i, : len(p) + len(r)] = 1
    prompts = torch.tensor([p] * len(rows))
    return DataProto.from_dict(
        tensors={"prompts": prompts, "responses": resp, "attention_mask": attn},
        non_tensors={
            "data_source": np.array(sources, dtype=object),
            "reward_model": np.array([{"ground_truth": g} for g in truths], dtype=object),
        },
    )


def run_all(manager, data):
    return [asyncio.run(manager.run_single(data[i : i + 1])) for i in range(len(data))]


def test_components_weights_conditions_and_shared_calls(tokenizer, rewards_module):
    components = [
        {"name": "format", "path": rewards_module, "fn": "shared", "weight": 1.0},
        {"name": "correctness", "path": rewards_module, "fn": "shared", "weight": 2.0},
        {
            "name": "length",
            "path": rewards_module,
            "fn": "length",
            "weight": 0.5,
            "kwargs": {"limit": 8},
            "condition": {"on": "correctness", "threshold": 1.0},
        },
    ]
    manager = MultiRewardManager(make_config(components), tokenizer)
    data = make_batch(tokenizer, ["<a>7</a>", "<a>9</a> and more text", "7"], ["math", "math", "chat"], ["7"] * 3)
    out = run_all(manager, data)
    infos = [o["reward_extra_info"] for o in out]
    # sample 0: format 1, correct 1, length 1 (8 chars <= 8) -> 1*1 + 2*1 + 0.5*1 = 3.5
    # sample 1: format 1, correct 0 -> length gated to 0 -> 1
    # sample 2 (chat): no correctness entry -> NaN (abstains), so the gated length is NaN too -> 0*1 + 0 = 0
    assert [o["reward_score"] for o in out] == [3.5, 1.0, 0.0]
    assert infos[0]["length"] == 1.0 and infos[1]["length"] == 0.0  # raw values; the gate is the estimator's
    assert math.isnan(infos[2]["correctness"]) and infos[2]["format"] == 0.0
    assert all(set(i) == set(infos[0]) for i in infos)  # every sample carries every key
    assert all(i[ERROR_PREFIX + "correctness"] == 0.0 for i in infos)  # missing is not an error
    assert len(sys.modules[rewards_module].CALLS) == 3  # format and correctness share one call per sample


def test_failure_raises_with_component_source_and_clipped_response(tokenizer, rewards_module):
    manager = MultiRewardManager(make_config([{"name": "bad", "path": rewards_module, "fn": "broken"}]), tokenizer)
    data = make_batch(tokenizer, ["<a>1</a>" * 60], ["math"], ["1"])
    with pytest.raises(RewardFunctionError, match=r"'bad'.*data_source='math'.*boom.*more chars"):
        run_all(manager, data)


def test_failure_and_timeout_abstain_and_are_counted_with_on_error_nan(tokenizer, rewards_module):
    components = [
        {"name": "bad", "path": rewards_module, "fn": "broken"},
        {"name": "slow", "path": rewards_module, "fn": "slow"},
        {"name": "format", "path": rewards_module, "fn": "shared"},
    ]
    manager = MultiRewardManager(make_config(components, on_error="nan", timeout_s=0.3), tokenizer)
    (out,) = run_all(manager, make_batch(tokenizer, ["<a>7</a>"], ["math"], ["7"]))
    info = out["reward_extra_info"]
    assert math.isnan(info["bad"]) and info[ERROR_PREFIX + "bad"] == 1.0
    assert math.isnan(info["slow"]) and info[ERROR_PREFIX + "slow"] == 1.0
    assert info["format"] == 1.0 and out["reward_score"] == 1.0


def test_manager_builds_and_scores_inside_a_ray_actor(tmp_path):
    ray = pytest.importorskip("ray")
    tok_dir = tmp_path / "tok"
    build_tokenizer().save_pretrained(tok_dir)

    @ray.remote
    class Worker:
        def score(self, tok_dir):
            import asyncio

            from transformers import AutoTokenizer
            from verl.experimental.reward_loop.reward_manager import get_reward_manager_cls

            tok = AutoTokenizer.from_pretrained(tok_dir)
            comps = [
                {"name": "format", "path": "gdpo_verl.demo.rewards", "fn": "format_reward"},
                {"name": "correctness", "path": "gdpo_verl.demo.rewards", "fn": "correctness_reward"},
            ]
            manager = get_reward_manager_cls("gdpo_multi")(make_config(comps), tok)
            data = make_batch(tok, ["<a>7</a>"], ["toy"], ["7"])
            return asyncio.run(manager.run_single(data))

    here = str(Path(__file__).parent)  # the actor class refers to this module's helpers
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False, runtime_env={"env_vars": {"PYTHONPATH": here}})
    try:
        out = ray.get(Worker.remote().score.remote(str(tok_dir)), timeout=240)
    finally:
        ray.shutdown()
    assert out["reward_score"] == 2.0
    assert out["reward_extra_info"]["format"] == 1.0 and out["reward_extra_info"]["correctness"] == 1.0


def test_length_reward_gets_the_valid_response_token_count(tokenizer):
    # response_length is the count of valid response tokens (padding excluded, make_batch pads by 2): a budget
    # one token short fails the response, a budget of exactly its token count passes it.
    response = "3+4=7 so <a>7</a>"
    n = len(tokenizer(response)["input_ids"])
    components = [
        {"name": name, "path": "gdpo_verl.rewards.length", "fn": "length_reward", "kwargs": {"max_tokens": budget}}
        for name, budget in (("short", n - 1), ("exact", n))
    ]
    manager = MultiRewardManager(make_config(components), tokenizer)
    (out,) = run_all(manager, make_batch(tokenizer, [response], ["math"], ["7"]))
    assert out["reward_extra_info"]["short"] == 0.0 and out["reward_extra_info"]["exact"] == 1.0
