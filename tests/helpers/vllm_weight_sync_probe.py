"""Probe for tests/test_vllm_cpu_on_cpu.py: push weights into a vLLM CPU engine through verl's weight sync.

Run: ``python tests/helpers/vllm_weight_sync_probe.py OUT_DIR patched|unpatched|bad`` (``bad``: patched, and one
pushed tensor has the wrong shape, so loading fails inside the vLLM worker). Builds two tiny tied-embedding
Qwen2 models A and B (head dim 32, hidden 128: about 2 MB of weights, so a 1 MB bucket makes several buckets),
activates the CPU backend as a CPU run's processes do (``patched``: with the vLLM hooks), serves A with vLLM in
this process (``worker_extension_cls`` = verl's ``vLLMColocateWorkerExtension``), sends B's
weights with verl's ``BucketedWeightSender`` over shared memory, and prints one JSON line: the greedy tokens of
vLLM before and after the push, those of A and B under transformers, the worker call's error (if any) and the
``/dev/shm/verl_weights_*`` files left behind.
"""

from __future__ import annotations

import asyncio
import glob
import json
import os
import sys
import threading

import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

PROMPT = [3, 4, 5, 6, 7]
NEW_TOKENS = 8


def tiny(seed: int) -> Qwen2ForCausalLM:
    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=96, hidden_size=128, intermediate_size=512, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=4, max_position_embeddings=64, tie_word_embeddings=True, pad_token_id=0,
        eos_token_id=1, bos_token_id=2, initializer_range=0.5,  # large weights: varied greedy tokens
    )  # fmt: skip
    return Qwen2ForCausalLM(config).to(torch.float32).eval()


@torch.no_grad()
def hf_greedy(model) -> list[int]:
    ids = list(PROMPT)
    for _ in range(NEW_TOKENS):
        ids.append(int(model(torch.tensor([ids])).logits[0, -1].argmax()))
    return ids[len(PROMPT) :]


def main(out_dir: str, mode: str) -> None:
    os.environ.update(
        VLLM_ENABLE_V1_MULTIPROCESSING="0", VLLM_CPU_KVCACHE_SPACE="1", VLLM_CPU_OMP_THREADS_BIND="nobind",
        VERL_RAY_JOB_ID=f"probe{os.getpid()}",
    )  # fmt: skip
    a, b = tiny(0), tiny(1)
    a.save_pretrained(out_dir)
    shm_before = set(glob.glob("/dev/shm/verl_weights_*"))
    if mode in ("patched", "bad"):
        os.environ["GDPO_VERL_ROLLOUT"] = "vllm"  # what the CPU preset sets for rollout=vllm
    from gdpo_verl.cpu import activate, vllm_patches

    activate()  # the CPU backend, as in every process of a CPU run (with the vLLM hooks when patched)
    assert vllm_patches.is_applied() == (mode != "unpatched")
    from verl.workers.rollout.vllm_rollout.bucketed_weight_transfer import BucketedWeightSender
    from vllm import LLM, SamplingParams

    llm = LLM(
        model=out_dir, dtype="float32", enforce_eager=True, skip_tokenizer_init=True, max_model_len=64, seed=0,
        distributed_executor_backend="uni", enable_prefix_caching=False,
        worker_extension_cls="verl.workers.rollout.vllm_rollout.utils.vLLMColocateWorkerExtension",
    )  # fmt: skip
    params = SamplingParams(temperature=0.0, max_tokens=NEW_TOKENS, ignore_eos=True, detokenize=False)

    def greedy() -> list[int]:
        return list(llm.generate([{"prompt_token_ids": PROMPT}], params, use_tqdm=False)[0].outputs[0].token_ids)

    before = greedy()
    (handle,) = llm.collective_rpc("_get_zmq_handle")
    sender = BucketedWeightSender(zmq_handle=handle, bucket_size_mb=1, use_shm=True)
    sent: list[str] = []

    pushed = dict(b.state_dict())
    if mode == "bad":
        pushed["model.layers.1.mlp.down_proj.weight"] = torch.zeros(3, 5)

    def send() -> None:
        try:
            asyncio.run(sender.async_send_weights(iter(pushed.items())))
            sent.append("ok")
        except BaseException as exc:  # noqa: BLE001  # reported
            sent.append(repr(exc))

    thread = threading.Thread(target=send, daemon=True)
    thread.start()
    error = None
    try:
        llm.collective_rpc("update_weights_from_ipc", kwargs={"use_shm": True})
    except Exception as exc:  # noqa: BLE001  # reported
        error = f"{type(exc).__name__}: {exc}"
    thread.join(timeout=60)
    after = greedy() if error is None else None
    shm_left = sorted(set(glob.glob("/dev/shm/verl_weights_*")) - shm_before)
    report = {
        "before": before, "after": after, "hf_a": hf_greedy(a), "hf_b": hf_greedy(b), "error": error,
        "sender": sent[0] if sent else "still waiting", "shm_left": shm_left,
    }  # fmt: skip
    print("PROBE " + json.dumps(report), flush=True)
    os._exit(0)  # a hung sender thread (unpatched mode) must not keep the process alive


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
