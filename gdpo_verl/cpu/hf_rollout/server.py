"""Token-in/token-out generation server on ``transformers`` ``generate``: verl's rollout server on CPU.

One Ray actor per rollout replica (created by :class:`gdpo_verl.cpu.hf_rollout.replica.HFReplica`). It offers the
methods verl calls on a vLLM server actor: ``generate`` (what ``LLMServerClient`` calls for every agent-loop
turn), ``wake_up``/``sleep``/``clear_kv_cache``/... (no-ops: the weights live in host RAM and there is no KV-cache
pool), ``abort_all_requests``/``resume_generation`` and ``set_global_steps``, plus ``load_weights``, through which
:class:`gdpo_verl.cpu.hf_rollout.adapter.HFServerAdapter` pushes the actor's weights after every training step.

Concurrent requests are gathered for a few milliseconds and those with equal sampling settings run as one
left-padded ``generate`` batch (at most ``rollout.max_num_seqs`` rows) in a worker thread, so the actor's event
loop keeps accepting requests. Sampling and reported log-probs follow :mod:`gdpo_verl.cpu.hf_rollout.sampling`.
The model runs with ``sdpa`` attention in ``rollout.dtype``. Text-only: multimodal inputs raise ``ValueError``.
"""

from __future__ import annotations

import asyncio
import logging
import threading

import torch
from transformers import AutoModelForCausalLM, GenerationConfig
from verl.utils.config import omega_conf_to_dataclass
from verl.utils.torch_dtypes import PrecisionType
from verl.workers.config import HFModelConfig
from verl.workers.rollout.replica import TokenOutput

from gdpo_verl.cpu.hf_rollout.sampling import (
    SamplingProcessor,
    SamplingSpec,
    check_logprobs_mode,
    parse_sampling_params,
)

logger = logging.getLogger(__name__)

_GATHER_SECONDS = 0.005


def _eos_token_ids(model_config: HFModelConfig) -> list[int]:
    eos = model_config.generation_config.eos_token_id if model_config.generation_config is not None else None
    eos = eos if eos is not None else model_config.hf_config.eos_token_id
    if eos is None and model_config.tokenizer is not None:
        eos = model_config.tokenizer.eos_token_id
    if eos is None:
        return []
    return [int(e) for e in (eos if isinstance(eos, list | tuple) else [eos])]


class HFGenerateServer:
    """Ray actor body (wrapped with ``ray.remote`` by the replica); see the module docstring."""

    def __init__(self, config, model_config, replica_rank: int):
        self.config = omega_conf_to_dataclass(config)
        self.model_config: HFModelConfig = omega_conf_to_dataclass(model_config, dataclass_type=HFModelConfig)
        self.replica_rank = replica_rank
        self.global_steps = None
        self.max_model_len = self.config.max_model_len or (self.config.prompt_length + self.config.response_length)
        self.eos_token_ids = _eos_token_ids(self.model_config)
        pad = self.model_config.hf_config.pad_token_id
        self.pad_token_id = int(pad if pad is not None else (self.eos_token_ids or [0])[0])
        check_logprobs_mode(self.config.logprobs_mode)
        if self.config.full_determinism:
            raise ValueError("The HF rollout server cannot honour rollout.full_determinism (per-request seeds)")
        self.model = self._load_model()
        self._model_lock = threading.Lock()
        self._pending: list[tuple[SamplingSpec, list[int], asyncio.Future]] = []
        self._drain_task: asyncio.Task | None = None

    def _load_model(self) -> torch.nn.Module:
        kwargs = {
            "dtype": PrecisionType.to_dtype(self.config.dtype),
            "trust_remote_code": self.model_config.trust_remote_code,
            "attn_implementation": "sdpa",  # FlashAttention does not run on CPU
        }
        if self.config.load_format == "dummy":  # weights arrive from the actor before the first rollout
            model = AutoModelForCausalLM.from_config(self.model_config.hf_config, **kwargs)
        else:
            model = AutoModelForCausalLM.from_pretrained(
                self.model_config.local_path, config=self.model_config.hf_config, **kwargs
            )
        # Generation defaults from the hub (e.g. top_k=20) must not leak into sampling: the server owns them.
        model.generation_config = GenerationConfig(eos_token_id=self.eos_token_ids, pad_token_id=self.pad_token_id)
        return model.eval()

    # --- weights ---------------------------------------------------------------------------------------------
    def _load_state(self, named_tensors: dict[str, torch.Tensor]) -> None:
        with self._model_lock:
            missing_ok = self.model.load_state_dict(named_tensors, strict=False)
        if missing_ok.unexpected_keys:
            raise KeyError(f"weights not in the rollout model: {missing_ok.unexpected_keys[:5]}")

    async def load_weights(self, named_tensors: dict[str, torch.Tensor]) -> int:
        """Copy a bucket of actor weights (HF parameter names) into the model; returns the tensor count."""
        await asyncio.to_thread(self._load_state, named_tensors)
        return len(named_tensors)

    async def set_global_steps(self, global_steps: int) -> None:
        self.global_steps = global_steps

    # --- generation --------------------------------------------------------------------------------------------
    def _max_new_tokens(self, sampling_params: dict, prompt_len: int) -> int:
        room = self.max_model_len - prompt_len
        if room < 1:
            raise ValueError(f"prompt of {prompt_len} tokens leaves no room within max_model_len={self.max_model_len}")
        requested = sampling_params.pop("max_tokens", sampling_params.pop("max_new_tokens", None))
        if requested is None:
            requested = min(
                self.config.response_length, self.config.prompt_length + self.config.response_length - prompt_len
            )
        return max(1, min(int(requested), room))

    async def generate(
        self,
        prompt_ids: list[int],
        sampling_params: dict,
        request_id: str,
        image_data=None,
        video_data=None,
        audio_data=None,
        mm_processor_kwargs=None,
        **unsupported,
    ) -> TokenOutput:
        """Generate one response (token ids and, if asked, log-probs) for ``prompt_ids``."""
        if image_data is not None or video_data is not None or audio_data is not None or mm_processor_kwargs:
            raise ValueError("The HF rollout server is text-only")
        if unsupported:
            raise ValueError(f"The HF rollout server does not support generate() arguments {sorted(unsupported)}")
        prompt_ids = [int(t) for t in prompt_ids]
        params = dict(sampling_params)
        max_new_tokens = self._max_new_tokens(params, len(prompt_ids))
        spec = parse_sampling_params(params, max_new_tokens=max_new_tokens, ignore_eos_default=self.config.ignore_eos)
        future = asyncio.get_running_loop().create_future()
        self._pending.append((spec, prompt_ids, future))
        if self._drain_task is None or self._drain_task.done():
            self._drain_task = asyncio.create_task(self._drain())
        return await future

    async def _drain(self) -> None:
        while self._pending:
            await asyncio.sleep(_GATHER_SECONDS)
            if not self._pending:
                return
            spec = self._pending[0][0]
            batch = [item for item in self._pending if item[0] == spec][: self.config.max_num_seqs]
            self._pending = [item for item in self._pending if not any(item is b for b in batch)]
            try:
                outputs = await asyncio.to_thread(self._generate_batch, spec, [prompt for _, prompt, _ in batch])
            except Exception as error:  # hand the failure to every waiting request
                for _, _, future in batch:
                    if not future.done():
                        future.set_exception(error)
                continue
            for (_, _, future), output in zip(batch, outputs):
                if not future.done():
                    future.set_result(output)

    def _generate_batch(self, spec: SamplingSpec, prompts: list[list[int]]) -> list[TokenOutput]:
        width = max(len(p) for p in prompts)
        input_ids = torch.full((len(prompts), width), self.pad_token_id, dtype=torch.long)
        attention_mask = torch.zeros_like(input_ids)
        for row, prompt in enumerate(prompts):  # left padding
            input_ids[row, width - len(prompt) :] = torch.tensor(prompt, dtype=torch.long)
            attention_mask[row, width - len(prompt) :] = 1
        processor = SamplingProcessor(spec, self.config.logprobs_mode)
        with self._model_lock, torch.inference_mode():
            sequences = self.model.generate(
                input_ids=input_ids,
                attention_mask=attention_mask,
                generation_config=spec.generation_config(self.eos_token_ids, self.pad_token_id),
                logits_processor=[processor],
            )
        new_tokens = sequences[:, width:]
        logprobs = processor.token_logprobs(sequences)
        return [self._token_output(spec, new_tokens[row], logprobs[row]) for row in range(len(prompts))]

    def _token_output(self, spec: SamplingSpec, tokens: torch.Tensor, logprobs: torch.Tensor) -> TokenOutput:
        length = len(tokens)
        if not spec.ignore_eos and self.eos_token_ids:
            is_eos = torch.isin(tokens, torch.tensor(self.eos_token_ids))
            if bool(is_eos.any()):
                length = int(is_eos.nonzero()[0, 0]) + 1  # keep the EOS token, as vLLM does
        return TokenOutput(
            token_ids=tokens[:length].tolist(),
            log_probs=logprobs[:length].tolist() if spec.want_logprobs else None,
            stop_reason="completed",
            extra_fields={"global_steps": self.global_steps},
        )

    # --- lifecycle calls verl makes on every rollout server --------------------------------------------------------
    async def abort_all_requests(self, reset_prefix_cache: bool = True, reject_request: bool = False) -> dict:
        """Fail over requests that have not started; a running batch finishes (it cannot be interrupted)."""
        aborted, self._pending = self._pending, []
        for _, _, future in aborted:
            if not future.done():
                future.set_result(
                    TokenOutput(token_ids=[], stop_reason="aborted", extra_fields={"global_steps": self.global_steps})
                )
        return {"aborted_count": len(aborted), "request_ids": []}

    async def wait_for_requests_to_drain(self) -> None:
        while self._drain_task is not None and not self._drain_task.done():
            await asyncio.sleep(_GATHER_SECONDS)

    async def resume_generation(self) -> None:
        return None

    async def wake_up(self, tags: list[str] | None = None) -> None:
        return None

    async def sleep(self) -> None:
        return None

    async def clear_kv_cache(self) -> None:
        return None

    async def release_kv_cache(self) -> None:
        return None

    async def resume_kv_cache(self) -> None:
        return None

    async def start_profile(self, **kwargs) -> None:
        return None

    async def stop_profile(self) -> None:
        return None
