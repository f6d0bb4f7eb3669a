"""Tests of the CPU demo's offline assets: the task's verl parquet, the cached asset build, the tokenizer.

Run with ``.venv/bin/python -m pytest tests/test_demo_assets_on_cpu.py``. The asset build runs once per
module with a shortened warm start (150 instead of 700 steps, about 10 s on 2 cores) into a temporary cache.
"""

from __future__ import annotations

import doctest
import functools
import json
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

import gdpo_verl.demo.threads
import gdpo_verl.demo.warmstart
from gdpo_verl.demo import assets as assets_module
from gdpo_verl.demo.rewards import REWARD_KEYS, compute_score
from gdpo_verl.demo.settings import DemoSettings, WarmStartConfig
from gdpo_verl.demo.task import DATA_SOURCE, Problem, split_problems, write_splits

QUICK = DemoSettings(warm_start=WarmStartConfig(clean_steps=120, noisy_steps=30))
MAX_PROMPT_TOKENS = MAX_RESPONSE_TOKENS = 16


@pytest.mark.parametrize("module", [gdpo_verl.demo.warmstart, gdpo_verl.demo.threads])
def test_docstring_examples(module):
    result = doctest.testmod(module)
    assert result.attempted > 0 and result.failed == 0


def test_ideal_response_earns_every_reward():
    for problem in (Problem(0, 0), Problem(3, 4), Problem(9, 9)):
        assert compute_score(DATA_SOURCE, problem.ideal_response, problem.answer)["score"] == 3.0


def test_dataset_parquet_has_verl_schema(tmp_path):
    train_path, val_path = write_splits(tmp_path)
    train, val = pd.read_parquet(train_path), pd.read_parquet(val_path)
    assert (len(train), len(val)) == (300, 32)
    for frame, split in ((train, "train"), (val, "val")):
        assert list(frame.columns) == ["data_source", "prompt", "ability", "reward_model", "extra_info"]
        assert set(frame["data_source"]) == {DATA_SOURCE}
        for index, row in enumerate(frame.itertuples()):
            (message,) = list(row.prompt)
            assert message["role"] == "user"
            a, b = message["content"].rstrip("=").split("+")
            assert row.reward_model == {"style": "rule", "ground_truth": str(int(a) + int(b))}
            assert row.extra_info == {"split": split, "index": index}
    assert val["prompt"].map(lambda p: p[0]["content"]).is_unique


def test_dataset_is_deterministic(tmp_path):
    assert split_problems(seed=0) == split_problems(seed=0)
    assert split_problems(seed=0) != split_problems(seed=1)
    first, second = write_splits(tmp_path / "a"), write_splits(tmp_path / "b")
    for x, y in zip(first, second):
        pd.testing.assert_frame_equal(pd.read_parquet(x), pd.read_parquet(y))


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """(cache root, assets) of one quick build."""
    root = tmp_path_factory.mktemp("gdpo_verl_cache")
    return root, assets_module.ensure_demo_assets(root, QUICK)


@pytest.mark.slow
def test_build_layout_and_manifest(built):
    root, assets = built
    assert Path(assets.root).parent == root and Path(assets.root).name.startswith("demo-")
    assert [p.name for p in root.iterdir()] == [Path(assets.root).name]  # no staging directory left
    for path in (assets.train_parquet, assets.val_parquet, Path(assets.model_dir) / "config.json"):
        assert Path(path).is_file()
    manifest = json.loads((Path(assets.root) / "manifest.json").read_text())
    assert manifest == assets.manifest
    assert manifest["settings"]["warm_start"]["clean_steps"] == 120
    assert set(manifest["warm_start_rates"]["temperature_1"]) == {"score", *REWARD_KEYS}


@pytest.mark.slow
def test_cached_call_is_fast_and_light(built):
    root, assets = built
    start = time.monotonic()
    again = assets_module.ensure_demo_assets(root, QUICK, log=lambda line: None)
    assert time.monotonic() - start < 1.0
    assert again == assets
    code = (
        "import sys\n"
        "from gdpo_verl.demo import ensure_demo_assets\n"
        "from gdpo_verl.demo.settings import DemoMix, DemoSettings, ModelSize, WarmStartConfig\n"
        f"ensure_demo_assets({str(root)!r}, {QUICK!r})\n"
        "assert 'torch' not in sys.modules and 'transformers' not in sys.modules, 'heavy import on a cached call'\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "cached in" in result.stdout


def test_settings_and_code_version_pick_the_directory():
    quick, default = assets_module.assets_hash(QUICK), assets_module.assets_hash(DemoSettings())
    assert quick != default and quick == assets_module.assets_hash(QUICK)


def test_failed_build_leaves_no_trace(tmp_path, monkeypatch):
    def broken_build(out_dir, settings, log):
        (out_dir / "partial").write_text("half written")
        raise RuntimeError("build interrupted")

    monkeypatch.setattr(assets_module, "build_assets", broken_build)
    with pytest.raises(RuntimeError, match="build interrupted"):
        assets_module.ensure_demo_assets(tmp_path, QUICK, log=lambda line: None)
    assert list(tmp_path.iterdir()) == []


def test_cache_root_comes_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("GDPO_VERL_CACHE", str(tmp_path))
    assert assets_module.default_cache_root() == tmp_path
    monkeypatch.delenv("GDPO_VERL_CACHE")
    assert assets_module.default_cache_root() == Path.home() / ".cache" / "gdpo_verl"


@pytest.mark.slow
def test_tokenizer_loads_and_applies_the_chat_template(built):
    from transformers import AutoTokenizer

    _, assets = built
    tokenizer = AutoTokenizer.from_pretrained(assets.model_dir)
    assert (tokenizer.bos_token, tokenizer.eos_token, tokenizer.pad_token) == ("<|bos|>", "<|end|>", "<|pad|>")
    messages = [{"role": "user", "content": "3+4="}]
    text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    assert text == "<|bos|><|user|>3+4=<|end|><|assistant|>"
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    assert len(ids) == 8 and ids[0] == tokenizer.bos_token_id
    two_turns = messages + [{"role": "assistant", "content": "<a>7</a>"}]
    assert tokenizer.apply_chat_template(two_turns, tokenize=False) == text + "<a>7</a><|end|>"
    response = tokenizer("3+4=7 <a>7</a>", add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    assert tokenizer.decode(response + [tokenizer.pad_token_id], skip_special_tokens=True) == "3+4=7 <a>7</a>"
    assert len(response) == 10  # <a> and </a> are one token each


@pytest.mark.slow
def test_model_directory_tokenizer_matches_the_built_one(built):
    """AutoTokenizer on the model directory gives a Qwen2Tokenizer (config says qwen2); ids must not change."""
    from transformers import AutoTokenizer
    from transformers.models.qwen2.tokenization_qwen2 import PRETOKENIZE_REGEX

    from gdpo_verl.demo.tokenizer import QWEN2_PRETOKENIZE_REGEX, build_tokenizer

    _, assets = built
    loaded, built_here = AutoTokenizer.from_pretrained(assets.model_dir), build_tokenizer()
    assert QWEN2_PRETOKENIZE_REGEX == PRETOKENIZE_REGEX
    assert len(loaded) == len(built_here) == 266
    assert loaded.get_vocab() == built_here.get_vocab()
    for text in ("3+4=7 <a>7</a>", "<a>18</a>.", " ok\n  é <a >", "<|bos|><|user|>3+4=<|end|><|assistant|>"):
        ids = built_here(text, add_special_tokens=False)["input_ids"]
        assert loaded(text, add_special_tokens=False)["input_ids"] == ids
        assert loaded.decode(ids) == built_here.decode(ids) == text


@given(st.text(max_size=40))
def test_tokenizer_round_trips_any_text(text):
    import unicodedata

    from gdpo_verl.demo.tokenizer import SPECIAL_TOKENS

    tokenizer = _demo_tokenizer()
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    expected = unicodedata.normalize("NFC", text)
    for token in SPECIAL_TOKENS:
        expected = expected.replace(token, "")
    assert tokenizer.unk_token_id not in ids
    assert tokenizer.decode(ids, skip_special_tokens=True) == expected


@functools.cache
def _demo_tokenizer():
    from gdpo_verl.demo.tokenizer import build_tokenizer

    return build_tokenizer()


@pytest.mark.slow
def test_prompts_and_responses_fit_the_demo_lengths(built):
    from transformers import AutoTokenizer

    _, assets = built
    tokenizer = AutoTokenizer.from_pretrained(assets.model_dir)
    for path in (assets.train_parquet, assets.val_parquet):
        for prompt in pd.read_parquet(path)["prompt"]:
            ids = tokenizer.apply_chat_template(list(prompt), add_generation_prompt=True, tokenize=False)
            assert len(tokenizer(ids, add_special_tokens=False)["input_ids"]) <= MAX_PROMPT_TOKENS
    longest_demonstration = "9+9=18 <a>18</a>"
    assert len(tokenizer(longest_demonstration, add_special_tokens=False)["input_ids"]) + 1 <= MAX_RESPONSE_TOKENS


def test_model_loads_as_tiny_float32_qwen2(built):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    _, assets = built
    model = AutoModelForCausalLM.from_pretrained(assets.model_dir)
    tokenizer = AutoTokenizer.from_pretrained(assets.model_dir)
    assert model.config.model_type == "qwen2" and model.config.tie_word_embeddings
    assert model.dtype == torch.float32
    assert model.config.vocab_size == len(tokenizer)
    assert model.generation_config.eos_token_id == tokenizer.eos_token_id
    with torch.no_grad():
        logits = model(torch.tensor([[tokenizer.bos_token_id, 5, 11]])).logits
    assert logits.shape == (1, 3, len(tokenizer))


@pytest.mark.slow
def test_warm_started_model_is_partly_well_formed(built):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from gdpo_verl.demo.evaluate import reward_rates, sample_responses
    from gdpo_verl.demo.task import all_problems

    _, assets = built
    model = AutoModelForCausalLM.from_pretrained(assets.model_dir).eval()
    tokenizer = AutoTokenizer.from_pretrained(assets.model_dir)
    rates = reward_rates(model, tokenizer, all_problems(), temperature=1.0, samples=4)
    assert rates == assets.manifest["warm_start_rates"]["temperature_1"]  # the saved model is the measured one
    assert 0.1 <= rates["format"] <= 0.9, rates  # room for RL both ways
    assert rates["brevity"] < 1.0
    responses = sample_responses(model, tokenizer, [Problem(3, 4)], temperature=1.0, samples=16)
    assert len(set(responses)) > 1  # sampling explores
    assert all(len(tokenizer(r, add_special_tokens=False)["input_ids"]) <= MAX_RESPONSE_TOKENS for r in responses)
