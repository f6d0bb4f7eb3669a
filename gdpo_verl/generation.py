"""Generate responses to chat prompts: Hugging Face ``generate`` (CPU or GPU), or vLLM on GPU when installed.

The one generation helper of the project: ``gdpo_verl.demo.evaluate`` (the toy task's reward rates) and
``gdpo_verl.tools.evaluate`` (the paper's metrics on a test split) both call it.

- ``hf_generate(model, tokenizer, prompts, ...)``: each prompt (a chat list of ``{role, content}``) goes through
  the tokenizer's chat template with the generation prompt; rows are left padded into batches of
  ``(batch_size, prompt_len)`` token ids; responses are cut at eos and decoded with ``skip_special_tokens=True``,
  as verl's reward loop decodes them. Temperature 0 is greedy decoding; otherwise sampling with nucleus
  ``top_p`` (default 1: plain sampling; ``top_k`` 0) seeded once with ``torch.manual_seed(seed)`` before the
  first batch.
- ``vllm_generate(model_path, prompts, ...)``: the same through ``vllm.LLM.chat`` (guarded import; needs a GPU
  and the ``gpu`` extra). Not exercised by the CPU test suite.

Both return a ``Generation(text, tokens)`` per (prompt, sample), prompt-major: ``samples`` in a row per prompt.
``tokens`` counts the response's tokens up to and including the first eos (what verl's reward manager passes
as ``response_length``). Try: ``python -m gdpo_verl.tools.evaluate --task demo``.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any, NamedTuple

import torch


class Generation(NamedTuple):
    """One response: its decoded text and its token count (eos included when generated)."""

    text: str
    tokens: int


def _sampling(temperature: float, top_p: float = 1.0) -> dict[str, Any]:
    if temperature > 0:
        return {"do_sample": True, "temperature": temperature, "top_k": 0, "top_p": top_p}
    return {"do_sample": False}


@torch.no_grad()
def hf_generate(
    model: Any,
    tokenizer: Any,
    prompts: Sequence[Sequence[dict]],
    max_new_tokens: int,
    temperature: float = 0.0,
    samples: int = 1,
    seed: int = 0,
    batch_size: int | None = None,
    progress: bool = False,
    top_p: float = 1.0,
) -> list[Generation]:
    """``samples`` responses per chat prompt (prompt-major), in batches of ``batch_size`` rows (None: one batch)."""
    texts = [
        tokenizer.apply_chat_template(list(p), add_generation_prompt=True, tokenize=False)
        for p in prompts
        for _ in range(samples)
    ]
    ids = [tokenizer(text, add_special_tokens=False)["input_ids"] for text in texts]
    size = batch_size or max(1, len(ids))
    pad, eos = tokenizer.pad_token_id, tokenizer.eos_token_id
    pad = eos if pad is None else pad
    device = next(model.parameters()).device
    torch.manual_seed(seed)
    out: list[Generation] = []
    from tqdm import tqdm

    bar = tqdm(total=len(ids), desc="generate", unit="resp", file=sys.stderr, disable=not progress)
    for start in range(0, len(ids), size):
        chunk = ids[start : start + size]
        width = max(len(row) for row in chunk)
        input_ids = torch.tensor([[pad] * (width - len(row)) + row for row in chunk], device=device)
        attention_mask = torch.tensor([[0] * (width - len(row)) + [1] * len(row) for row in chunk], device=device)
        generated = model.generate(
            input_ids=input_ids,
            attention_mask=attention_mask,
            max_new_tokens=max_new_tokens,
            eos_token_id=eos,
            pad_token_id=pad,
            **_sampling(temperature, top_p),
        )[:, width:]
        for row in generated.tolist():
            tokens = row.index(eos) + 1 if eos in row else len(row)
            out.append(Generation(tokenizer.decode(row[:tokens], skip_special_tokens=True), tokens))
        bar.update(len(chunk))
    bar.close()
    return out


def vllm_available() -> bool:
    """Whether vLLM imports and a CUDA GPU is visible."""
    try:
        import vllm  # noqa: F401
    except Exception:
        return False
    return torch.cuda.is_available()


def vllm_generate(
    model_path: str,
    prompts: Sequence[Sequence[dict]],
    max_new_tokens: int,
    temperature: float = 0.0,
    samples: int = 1,
    seed: int = 0,
    top_p: float = 1.0,
) -> list[Generation]:  # pragma: no cover - needs a GPU and vLLM
    """``hf_generate``'s contract through vLLM (one engine per call; its own progress bar)."""
    from vllm import LLM, SamplingParams

    llm = LLM(model=model_path, seed=seed)
    params = SamplingParams(n=samples, temperature=temperature, top_p=top_p, max_tokens=max_new_tokens, seed=seed)
    results = llm.chat([list(p) for p in prompts], params, use_tqdm=True)
    return [Generation(o.text, len(o.token_ids)) for r in results for o in r.outputs]
