"""Measure a model on the toy task: sample responses with HF ``generate`` and average the toy rewards.

Used by the asset build (to print the warm-started model's rates) and by the tests. Prompts are left
padded into one batch ``(n_problems * samples, prompt_len)``; responses are cut at eos and decoded with
``skip_special_tokens=True``, as verl's reward loop does, then scored by ``gdpo_verl.demo.rewards``.
Run ``python -m gdpo_verl.demo.evaluate MODEL_DIR`` to print the rates of a saved model.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from gdpo_verl.demo.rewards import REWARD_KEYS, compute_score
from gdpo_verl.demo.task import Problem
from gdpo_verl.demo.threads import torch_threads

MAX_NEW_TOKENS = 16


@torch.no_grad()
def sample_responses(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    problems: Sequence[Problem],
    temperature: float = 1.0,
    samples: int = 1,
    seed: int = 0,
    threads: int = 1,
) -> list[str]:
    """``samples`` decoded responses per problem (problem-major order); ``temperature`` 0 means greedy.

    Generation runs on ``threads`` torch threads (see ``gdpo_verl.demo.threads``).
    """
    prompts = [
        tokenizer.apply_chat_template(
            [{"role": "user", "content": p.question}], add_generation_prompt=True, tokenize=False
        )
        for p in problems
        for _ in range(samples)
    ]
    ids = [tokenizer(text, add_special_tokens=False)["input_ids"] for text in prompts]
    width = max(len(row) for row in ids)
    pad = tokenizer.pad_token_id
    input_ids = torch.tensor([[pad] * (width - len(row)) + row for row in ids])
    attention_mask = torch.tensor([[0] * (width - len(row)) + [1] * len(row) for row in ids])
    torch.manual_seed(seed)
    sampling = (
        {"do_sample": True, "temperature": temperature, "top_k": 0, "top_p": 1.0}
        if temperature > 0
        else {"do_sample": False}
    )
    with torch_threads(threads):
        out = model.generate(
            input_ids=input_ids,
            attention_mask=attention_mask,
            max_new_tokens=MAX_NEW_TOKENS,
            eos_token_id=tokenizer.eos_token_id,
            pad_token_id=pad,
            **sampling,
        )
    return tokenizer.batch_decode(out[:, width:], skip_special_tokens=True)


def reward_rates(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    problems: Sequence[Problem],
    temperature: float = 1.0,
    samples: int = 4,
    seed: int = 0,
) -> dict[str, float]:
    """Mean of each toy reward (and of ``score``) over ``samples`` responses per problem.

    Greedy decoding (``temperature`` 0) is deterministic, so it uses one sample per problem.
    """
    samples = samples if temperature > 0 else 1
    responses = sample_responses(model, tokenizer, problems, temperature, samples, seed)
    answers = [p.answer for p in problems for _ in range(samples)]
    scores = [compute_score("", r, a) for r, a in zip(responses, answers)]
    return {key: round(sum(s[key] for s in scores) / len(scores), 3) for key in ("score", *REWARD_KEYS)}


if __name__ == "__main__":
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from gdpo_verl.demo.task import all_problems

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model_dir")
    parser.add_argument("--temperature", type=float, default=1.0)
    args = parser.parse_args()
    lm = AutoModelForCausalLM.from_pretrained(args.model_dir).eval()
    tok = AutoTokenizer.from_pretrained(args.model_dir)
    print(reward_rates(lm, tok, all_problems(), temperature=args.temperature))
