"""The ``gdpo_multi`` reward manager on real DataProto batches (demo tokenizer), and inside a Ray actor.

Run: .venv/bin/python -m pytest tests/test_manager_on_cpu.py
"""

import asyncio
import math
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf
from verl import DataProto

from gdpo_verl.core.contract import ERROR_PREFIX, MISSING_PREFIX, NONFINITE_PREFIX, TOKENS_PREFIX
from gdpo_verl.demo.tokenizer import build_tokenizer
from gdpo_verl.manager import MultiRewardManager, RewardFunctionError

FUNCS = textwrap.dedent(
    """
    import os, sys, time

    def _count(name):  # calls run in worker processes: count them in a file
        with open(os.path.join(os.path.dirname(__file__), name + ".calls"), "a") as f:
            f.write("x")

    def shared(data_source, solution_str, ground_truth, extra_info=None):
        _count("shared")
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

    def hang(solution_str):
        while True:
            pass

    def healthy(solution_str):
        return 1.0

    def own_timeout(solution_str):
        raise TimeoutError("the function's own")

    def huge(solution_str):
        return 10**400

    def per_token(response_length):  # a process reward: one value per response token
        return [0.25 * (i % 3) for i in range(response_length)]

    def per_token_array(response_length):
        import numpy as np
        return np.full(response_length, 0.5, dtype=np.float32)

    def per_token_short(response_length):
        return [1.0] * (response_length - 1)

    def per_token_inf(response_length):
        return [float("inf")] + [0.0] * (response_length - 1)

    def per_token_nested(response_length):
        return [[0.0]] * response_length

    def per_token_strings(response_length):
        return ["1"] * response_length

    def per_token_f32_overflow(response_length):
        return [1e39] * response_length

    def two_values(solution_str):
        import numpy as np
        return np.array([1.0, 2.0])

    def np_string(solution_str):
        import numpy as np
        return np.str_("abc")

    def exits(solution_str):
        sys.exit(3)

    def interrupt(solution_str):
        raise KeyboardInterrupt

    def bad_str(solution_str):
        class Weird(Exception):
            def __str__(self):
                raise RuntimeError("no")
        raise Weird()

    def plus_inf(solution_str):
        return float("inf")

    def minus_inf(solution_str):
        return float("-inf")

    def nan(solution_str):
        return float("nan")

    def a_string(solution_str):
        return "1.0"

    def typo(solution_str):
        return {"correctness": 1.0}
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
    import mr_rewards  # noqa: F401  (so the tests can find the module's folder)

    yield "mr_rewards"
    sys.modules.pop("mr_rewards", None)


def make_config(components, on_error="raise", timeout_s=30, processes=2):
    gdpo = {"on_error": on_error, "timeout_s": timeout_s, "processes": processes, "components": components}
    agent = {"agent_loop_manager_class": "gdpo_verl.verl_glue.agent_loop.GDPOAgentLoopManager"}
    return OmegaConf.create(
        {
            "trainer": {"experiment_name": "t"},
            "reward": {"gdpo": gdpo},
            "actor_rollout_ref": {"rollout": {"agent": agent}},
        }
    )


def calls(module, name):
    path = Path(sys.modules[module].__file__).with_name(name + ".calls")
    return len(path.read_text()) if path.exists() else 0


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


@pytest.fixture(autouse=True)
def close_every_manager(monkeypatch):
    """Each manager a test builds has its reward-call pool closed at the end of the test."""
    made = []
    init = MultiRewardManager.__init__

    def tracking(self, *args, **kwargs):
        made.append(self)
        init(self, *args, **kwargs)

    monkeypatch.setattr(MultiRewardManager, "__init__", tracking)
    yield
    for manager in made:
        if hasattr(manager, "scorer"):
            manager.scorer.close()


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
    assert calls(rewards_module, "shared") == 3  # format and correctness share one call per sample


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


@pytest.mark.slow
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


# --- failures go through on_error (one case each) --------------------------------------------------------------
FAILURES = {
    "broken": "RuntimeError: boom",
    "slow": "timed out after 0.5 s",
    "own_timeout": "TimeoutError: the function's own",
    "huge": "does not fit a float",
    "two_values": "2 per-token values for a response of",
    "np_string": "returned str_",
    "exits": "SystemExit: 3",
    "interrupt": "KeyboardInterrupt",
    "bad_str": "Weird: <unprintable message>",
    "plus_inf": "returned inf, which is not finite",
    "minus_inf": "returned -inf, which is not finite",
    "nan": "returned nan, which is not finite",
    "a_string": "returned str '1.0'",
}


@pytest.mark.parametrize("fn", sorted(FAILURES))
def test_every_failure_abstains_under_nan_and_is_counted(tokenizer, rewards_module, fn):
    components = [
        {"name": "r", "path": rewards_module, "fn": fn},
        {"name": "ok", "path": rewards_module, "fn": "healthy"},
    ]
    manager = MultiRewardManager(make_config(components, on_error="nan", timeout_s=0.5), tokenizer)
    try:
        (out,) = run_all(manager, make_batch(tokenizer, ["<a>7</a>"], ["math"], ["7"]))
    finally:
        manager.scorer.close()
    info = out["reward_extra_info"]
    assert math.isnan(info["r"]) and info[ERROR_PREFIX + "r"] == 1.0
    assert info[NONFINITE_PREFIX + "r"] == float(fn in ("plus_inf", "minus_inf", "nan"))
    assert info["ok"] == 1.0 and info[ERROR_PREFIX + "ok"] == 0.0 and out["reward_score"] == 1.0


@pytest.mark.parametrize("fn", sorted(FAILURES))
def test_every_failure_raises_naming_component_function_source_and_response(tokenizer, rewards_module, fn):
    components = [{"name": "r", "path": rewards_module, "fn": fn}]
    manager = MultiRewardManager(make_config(components, timeout_s=0.5), tokenizer)
    try:
        with pytest.raises(RewardFunctionError) as caught:
            run_all(manager, make_batch(tokenizer, ["<a>7</a>"], ["math"], ["7"]))
    finally:
        manager.scorer.close()
    message = str(caught.value)
    assert f"'r' ({rewards_module}:{fn})" in message and "data_source='math'" in message and "<a>7</a>" in message
    assert FAILURES[fn] in message


def test_a_hung_component_is_killed_and_never_starves_a_healthy_one(tokenizer, rewards_module):
    # One component loops forever on every sample. Each call is stopped at its time-out (its worker process is
    # killed), the healthy component scores every sample, and no sample waits much longer than the time-out.
    components = [
        {"name": "h", "path": rewards_module, "fn": "hang"},
        {"name": "ok", "path": rewards_module, "fn": "healthy"},
    ]
    manager = MultiRewardManager(make_config(components, on_error="nan", timeout_s=0.5, processes=2), tokenizer)
    data = make_batch(tokenizer, ["<a>7</a>"] * 10, ["math"] * 10, ["7"] * 10)

    async def all_samples():
        async def one(i):
            start = time.monotonic()
            out = await manager.run_single(data[i : i + 1])
            return out, time.monotonic() - start

        return await asyncio.gather(*(one(i) for i in range(len(data))))

    try:
        start = time.monotonic()
        results = asyncio.run(all_samples())
        total = time.monotonic() - start
    finally:
        manager.scorer.close()
    assert all(out["reward_extra_info"]["ok"] == 1.0 for out, _ in results)  # never marked as an error
    assert all(out["reward_extra_info"][ERROR_PREFIX + "h"] == 1.0 for out, _ in results)
    # 10 hung calls on 2 processes, 0.5 s each: about 2.5 s plus worker restarts; threads would never finish
    assert total < 20, total


def test_a_key_missing_from_a_dict_is_an_abstention_flagged_as_missing(tokenizer, rewards_module):
    components = [{"name": "correct", "path": rewards_module, "fn": "typo"}]
    manager = MultiRewardManager(make_config(components), tokenizer)  # on_error=raise: still no failure
    try:
        (out,) = run_all(manager, make_batch(tokenizer, ["<a>7</a>"], ["math"], ["7"]))
    finally:
        manager.scorer.close()
    info = out["reward_extra_info"]
    assert (
        math.isnan(info["correct"]) and info[MISSING_PREFIX + "correct"] == 1.0 and info[ERROR_PREFIX + "correct"] == 0
    )


def test_cheap_components_run_in_threads_with_the_same_outcomes(tokenizer, rewards_module):
    components = [
        {"name": "format", "path": rewards_module, "fn": "shared", "cheap": True},
        {"name": "bad", "path": rewards_module, "fn": "plus_inf", "cheap": True},
    ]
    manager = MultiRewardManager(make_config(components, on_error="nan"), tokenizer)
    (out,) = run_all(manager, make_batch(tokenizer, ["<a>7</a>"], ["math"], ["7"]))
    assert manager.scorer.caller._host is None  # no worker process was started
    assert out["reward_extra_info"]["format"] == 1.0 and out["reward_extra_info"][NONFINITE_PREFIX + "bad"] == 1.0


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


def test_the_grpo_reward_uses_the_weights_and_conditions_gdpo_uses(tokenizer, rewards_module):
    # A weight override on the command line lands in algorithm.gdpo_reward_weights: the manager's weighted sum (the
    # GRPO baseline's reward) must use it too, not the components' own weights.
    components = [
        {"name": "format", "path": rewards_module, "fn": "shared", "weight": 1.0, "cheap": True},
        {"name": "correctness", "path": rewards_module, "fn": "shared", "weight": 1.0, "cheap": True},
    ]
    config = make_config(components)
    config.algorithm = {"gdpo_reward_keys": ["format", "correctness"], "gdpo_reward_weights": [0.5, 3.0],
                        "gdpo_reward_conditions": {"format": {"on": "correctness", "threshold": 1.0}}}  # fmt: skip
    manager = MultiRewardManager(config, tokenizer)
    data = make_batch(tokenizer, ["<a>7</a>", "<a>9</a>"], ["math", "math"], ["7", "7"])
    # sample 0: format 1, correctness 1 -> 0.5 * 1 + 3 * 1; sample 1: correctness 0 gates format to 0 -> 0
    assert [o["reward_score"] for o in run_all(manager, data)] == [3.5, 0.0]
    config.algorithm = {"gdpo_reward_keys": ["other"]}  # not these components: their own weights apply
    assert [o["reward_score"] for o in run_all(MultiRewardManager(config, tokenizer), data)] == [2.0, 1.0]


def test_a_process_reward_keeps_its_per_token_values_and_its_sum_is_the_components_value(tokenizer, rewards_module):

    components = [
        {"name": "steps", "path": rewards_module, "fn": "per_token", "weight": 1.0},
        {"name": "flat", "path": rewards_module, "fn": "per_token_array", "weight": 2.0},
    ]
    manager = MultiRewardManager(make_config(components), tokenizer)
    data = make_batch(tokenizer, ["<a>7</a>", "7"], ["math", "math"], ["7", "7"])
    lengths = data.batch["attention_mask"][:, data.batch["prompts"].shape[1] :].sum(-1).tolist()
    for out, n in zip(run_all(manager, data), lengths, strict=True):
        info = out["reward_extra_info"]
        assert info[TOKENS_PREFIX + "steps"] == [0.25 * (i % 3) for i in range(n)]
        assert info["steps"] == sum(0.25 * (i % 3) for i in range(n)) and info["flat"] == 0.5 * n
        assert out["reward_score"] == info["steps"] + 2 * info["flat"]  # GRPO's reward: the weighted sums


@pytest.mark.parametrize(
    "fn,message",
    [
        ("per_token_short", "per-token values for a response of"),
        ("per_token_inf", "not all finite"),
        ("per_token_nested", "nested sequence"),
        ("per_token_strings", "not per-token numbers"),
        ("per_token_f32_overflow", "too large for float32"),
    ],
)
def test_hostile_per_token_values_fail_through_on_error(tokenizer, rewards_module, fn, message):
    manager = MultiRewardManager(make_config([{"name": "p", "path": rewards_module, "fn": fn}]), tokenizer)
    with pytest.raises(RewardFunctionError, match=message):
        run_all(manager, make_batch(tokenizer, ["<a>7</a>"], ["math"], ["7"]))
    manager = MultiRewardManager(
        make_config([{"name": "p", "path": rewards_module, "fn": fn}], on_error="nan"), tokenizer
    )
    (out,) = run_all(manager, make_batch(tokenizer, ["<a>7</a>"], ["math"], ["7"]))
    assert math.isnan(out["reward_extra_info"]["p"]) and out["reward_extra_info"][ERROR_PREFIX + "p"] == 1.0
