"""Pre-flight checks (gdpo_verl/preflight.py) and the dry run that prints them and writes nothing.

Fast tests build a tiny model folder (the demo's one-token-per-character tokenizer and a Qwen2 config with 64
positions) and parquet files in tmp_path, and run ``check_run`` on the demo config pointed at them; the slow
tests run ``python -m gdpo_verl.main launch.dry_run=true`` as a user would.
Run: .venv/bin/python -m pytest tests/test_preflight_on_cpu.py -q
"""

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from helpers.compose import compose_config as compose_cfg

from gdpo_verl.main import apply_components
from gdpo_verl.preflight import check_run, looks_local

POSITIONS = 64


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    from transformers import Qwen2Config

    from gdpo_verl.demo.tokenizer import save_tokenizer

    folder = tmp_path_factory.mktemp("model")
    tokenizer = save_tokenizer(folder)
    Qwen2Config(
        vocab_size=len(tokenizer), hidden_size=8, num_hidden_layers=1, num_attention_heads=1,
        num_key_value_heads=1, intermediate_size=16, max_position_embeddings=POSITIONS,
    ).save_pretrained(folder)  # fmt: skip
    return folder


def _parquet(path: Path, questions: list[str]) -> Path:
    prompts = [[{"role": "user", "content": q}] for q in questions]
    pd.DataFrame({"prompt": prompts, "data_source": "toy"}).to_parquet(path)
    return path


def _cfg(model_dir, train, val, *overrides):
    cfg = compose_cfg(
        "demo",
        [
            "launch.demo=false",
            f"actor_rollout_ref.model.path={model_dir}",
            f"data.train_files={train}",
            f"data.val_files={val}",
            "data.train_batch_size=2",
            "actor_rollout_ref.actor.ppo_mini_batch_size=2",  # 2 prompts x 8 samples = 16 rows, one rank
            "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=16",
            "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=16",
            "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=16",
            "data.max_prompt_length=16",
            "data.max_response_length=16",
            "trainer.total_training_steps=null",
            "trainer.total_epochs=3",
            *overrides,
        ],
    )
    apply_components(cfg)  # algorithm.gdpo_reward_keys / weights, as gdpo_verl.main.validate derives them
    return cfg


@pytest.fixture
def data(tmp_path):
    short = _parquet(tmp_path / "train.parquet", ["1+2", "3+4", "5+6", "7+8", "a" * 40])  # the last: too long
    val = _parquet(tmp_path / "val.parquet", ["1+1"])
    return short, val


def test_summary_counts_prompts_steps_and_names_model_data_rewards(model_dir, data):
    train, val = data
    pre = check_run(_cfg(model_dir, train, val, "data.filter_overlong_prompts=true"), on_cpu=True)
    assert (pre.prompts_total, pre.prompts_kept, pre.steps_per_epoch, pre.steps) == (5, 4, 2, 6)
    assert pre.max_positions == POSITIONS and pre.longest_prompt > 40
    text = pre.summary()
    for piece in (str(model_dir), "local directory", "64 positions", f"{train} (5 rows)", f"{val} (1 rows)",
                  "4 of 5 fit", "6 (2 per epoch)", "2 prompts x 8 samples, gdpo", "rollout   hf",
                  "format x1, correctness x1, brevity x1", "1 node x 1 CPU"):  # fmt: skip
        assert piece in text, (piece, text)
    fixed = check_run(
        _cfg(model_dir, train, val, "data.filter_overlong_prompts=true", "trainer.total_training_steps=4"), True
    )
    assert fixed.steps == 4


@pytest.mark.parametrize(
    "overrides, match",
    [
        (["data.filter_overlong_prompts=true", "data.max_prompt_length=4"],
         r"no training prompt fits data.max_prompt_length=4 tokens: the shortest has \d+, the longest \d+ \(row 4\)"),
        (["data.truncation=error"], r"1 of 5 training prompts are longer than data.max_prompt_length=16 .*row 4.*"
                                    r"data.filter_overlong_prompts=true"),
        (["data.filter_overlong_prompts=true", "data.train_batch_size=8"],
         r"4 training prompts fit, fewer than data.train_batch_size=8"),
        (["data.max_response_length=60"], r"16 \+ 60 = 76 exceeds the model's max_position_embeddings=64"),
        (["actor_rollout_ref.model.path=./no/such/model"], r"model.path='./no/such/model': no such directory"),
        (["data.val_files=/no/such/val.parquet"], r"data.val_files: /no/such/val.parquet does not exist"),
    ],
)  # fmt: skip
def test_what_the_run_would_hit_fails_here_naming_the_setting(model_dir, data, overrides, match):
    train, val = data
    with pytest.raises(ValueError, match=match):
        check_run(_cfg(model_dir, train, val, *overrides), on_cpu=True)


def test_unreadable_and_empty_data_files(model_dir, data, tmp_path):
    train, val = data
    junk = tmp_path / "junk.parquet"
    junk.write_text("not parquet")
    with pytest.raises(ValueError, match=r"data.train_files: .*junk.parquet is not a readable parquet file"):
        check_run(_cfg(model_dir, junk, val), on_cpu=True)
    empty = _parquet(tmp_path / "empty.parquet", [])
    with pytest.raises(ValueError, match=r"data.val_files: .*empty.parquet has no rows"):
        check_run(_cfg(model_dir, train, empty), on_cpu=True)


def test_gpu_count_is_checked_on_one_node(model_dir, data):
    train, val = data
    keys = ("actor.ppo", "rollout.log_prob", "ref.log_prob")
    micro = [f"actor_rollout_ref.{k}_micro_batch_size_per_gpu=2" for k in keys]
    cfg = _cfg(model_dir, train, val, "trainer.n_gpus_per_node=8", "data.filter_overlong_prompts=true", *micro)
    with pytest.raises(ValueError, match=r"trainer.n_gpus_per_node=8 but this machine shows 0 GPU\(s\)"):
        check_run(cfg, on_cpu=False)


@pytest.mark.parametrize("path, local", [("/abs", True), ("./x", True), ("~/m", True), ("a/b/c", True),
                                         ("Qwen/Qwen2.5-1.5B", False), ("gpt2", False)])  # fmt: skip
def test_local_looking_paths(path, local):
    assert looks_local(path) is local


# ------------------------------------------------------------------------------------- as a user runs it (slow)


def _main(cwd: Path, *args: str, **env) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gdpo_verl.main", *args], capture_output=True, text=True,
                          cwd=cwd, env={**os.environ, **env}, timeout=600)  # fmt: skip


@pytest.mark.slow
def test_dry_run_prints_the_plan_and_writes_nothing(tmp_path):
    out = _main(tmp_path, "launch.dry_run=true")
    assert out.returncode == 0, out.stderr[-2000:]
    for piece in ("model ", "prompts   300 of 300 fit", "steps     30", "rewards   format x1", "dry run ok"):
        assert piece in out.stdout, (piece, out.stdout)
    assert list(tmp_path.iterdir()) == []  # no outputs/ folder, no Hydra files
    assert "Started a local Ray instance" not in out.stdout + out.stderr


@pytest.mark.slow
def test_dry_run_catches_an_unreachable_hub_model_offline(tmp_path):
    out = _main(tmp_path, "launch.dry_run=true", "launch.demo=false", "launch.probe_rewards=false",
                "actor_rollout_ref.model.path=gdpo-verl-test/no-such-model", HF_HUB_OFFLINE="1")  # fmt: skip
    assert out.returncode != 0
    assert (
        "model.path='gdpo-verl-test/no-such-model' (Hugging Face hub): the model's config does not load" in out.stderr
    )
    assert "dry run ok" not in out.stdout
