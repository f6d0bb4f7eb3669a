"""Sampling parameters for the HF rollout server: what it honours, and the log-probs it reports.

verl's agent loops send vLLM-style ``sampling_params`` (``temperature``, ``top_p``, ``top_k``,
``repetition_penalty``, ``logprobs``, optional ``max_tokens``). :func:`parse_sampling_params` turns them into a
:class:`SamplingSpec` and raises ``ValueError`` naming any key or value the server cannot honour.

:class:`SamplingProcessor` is the single place where logits become the sampling distribution. It runs as the
only active logits processor inside ``transformers``' ``generate`` (which is called with temperature 1, top-k 0,
top-p 1, so ``generate`` adds no warpers of its own) and applies, like vLLM: temperature, then top-k, then top-p
(keeping at least one token). It records the log-prob of each sampled token under ``rollout.logprobs_mode``:
``processed_logprobs`` (vLLM's and verl's default: the distribution actually sampled from) or ``raw_logprobs``
(plain ``log_softmax`` of the model logits). ``temperature == 0`` is greedy decoding with raw log-probs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from transformers import GenerationConfig, LogitsProcessor

SUPPORTED_LOGPROBS_MODES = ("processed_logprobs", "raw_logprobs")
_GREEDY_TEMPERATURE = 1e-5  # vLLM treats temperatures below this as greedy
_HONOURED_KEYS = frozenset(
    {"temperature", "top_p", "top_k", "repetition_penalty", "ignore_eos", "logprobs", "max_tokens", "max_new_tokens"}
)


@dataclass(frozen=True)
class SamplingSpec:
    """One request's sampling settings; requests with equal specs are generated in one batch."""

    temperature: float
    top_p: float
    top_k: int  # <= 0 disables top-k
    max_new_tokens: int
    ignore_eos: bool
    want_logprobs: bool

    @property
    def greedy(self) -> bool:
        return self.temperature < _GREEDY_TEMPERATURE

    def generation_config(self, eos_token_ids: list[int], pad_token_id: int) -> GenerationConfig:
        """A ``GenerationConfig`` that leaves every logits transform to :class:`SamplingProcessor`."""
        return GenerationConfig(
            do_sample=not self.greedy,
            temperature=1.0,
            top_k=0,
            top_p=1.0,
            repetition_penalty=1.0,
            max_new_tokens=self.max_new_tokens,
            eos_token_id=None if self.ignore_eos else eos_token_ids,
            pad_token_id=pad_token_id,
            num_beams=1,
            use_cache=True,
        )


def parse_sampling_params(params: dict, *, max_new_tokens: int, ignore_eos_default: bool) -> SamplingSpec:
    """Validate verl's ``sampling_params`` for the HF server; ``max_new_tokens`` is already budgeted."""
    unsupported = sorted(set(params) - _HONOURED_KEYS)
    if unsupported:
        raise ValueError(
            f"The HF rollout server cannot honour sampling params {unsupported}; it supports "
            f"{sorted(_HONOURED_KEYS)}. Use a vLLM/SGLang rollout on a GPU machine for them."
        )
    repetition_penalty = float(params.get("repetition_penalty", 1.0))
    if repetition_penalty != 1.0:
        raise ValueError(f"The HF rollout server supports repetition_penalty=1.0 only, got {repetition_penalty}")
    temperature = float(params.get("temperature", 1.0))
    top_p = float(params.get("top_p", 1.0))
    top_k = int(params.get("top_k", -1))
    if temperature < 0 or not math.isfinite(temperature):
        raise ValueError(f"temperature must be a finite number >= 0, got {temperature}")
    if not 0.0 < top_p <= 1.0:
        raise ValueError(f"top_p must be in (0, 1], got {top_p}")
    return SamplingSpec(
        temperature=temperature,
        top_p=top_p,
        top_k=top_k,
        max_new_tokens=max_new_tokens,
        ignore_eos=bool(params.get("ignore_eos", ignore_eos_default)),
        want_logprobs=bool(params.get("logprobs", False)),
    )


def process_logits(logits: torch.Tensor, spec: SamplingSpec) -> torch.Tensor:
    """Temperature, top-k, top-p (vLLM order and tie rules); masked entries become ``-inf``."""
    logits = logits.float()
    if spec.greedy:
        return logits
    logits = logits / spec.temperature
    if 0 < spec.top_k < logits.shape[-1]:
        kth_largest = torch.topk(logits, spec.top_k, dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth_largest, float("-inf"))
    if spec.top_p < 1.0:
        sorted_logits, order = torch.sort(logits, dim=-1, descending=False)
        cumulative = torch.softmax(sorted_logits, dim=-1).cumsum(dim=-1)
        drop_sorted = cumulative <= 1.0 - spec.top_p
        drop_sorted[..., -1] = False  # always keep the most likely token
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        logits = logits.masked_fill(drop, float("-inf"))
    return logits


def check_logprobs_mode(logprobs_mode: str) -> None:
    """Raise ``ValueError`` unless the server can report log-probs in ``rollout.logprobs_mode``."""
    if logprobs_mode not in SUPPORTED_LOGPROBS_MODES:
        raise ValueError(
            f"rollout.logprobs_mode={logprobs_mode!r} is not supported by the HF rollout server; "
            f"use one of {SUPPORTED_LOGPROBS_MODES}"
        )


class SamplingProcessor(LogitsProcessor):
    """Applies :func:`process_logits` and records the log-prob of every token ``generate`` then picks."""

    def __init__(self, spec: SamplingSpec, logprobs_mode: str):
        check_logprobs_mode(logprobs_mode)
        self.spec = spec
        self.raw = logprobs_mode == "raw_logprobs"
        self._last_logprobs: torch.Tensor | None = None
        self._picked: list[torch.Tensor] = []

    def _record(self, picked_tokens: torch.Tensor) -> None:
        if self._last_logprobs is not None:
            self._picked.append(self._last_logprobs.gather(-1, picked_tokens[:, None]).squeeze(-1))

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        self._record(input_ids[:, -1])  # the token picked after the previous call
        processed = process_logits(scores, self.spec)
        self._last_logprobs = torch.log_softmax(scores.float() if self.raw else processed, dim=-1)
        return processed

    def token_logprobs(self, sequences: torch.LongTensor) -> torch.Tensor:
        """``[batch, new_tokens]`` log-probs, given ``generate``'s final sequences (records the last token)."""
        self._record(sequences[:, -1])
        self._last_logprobs = None
        return torch.stack(self._picked, dim=1) if self._picked else sequences.new_zeros((len(sequences), 0)).float()
