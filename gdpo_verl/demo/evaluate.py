"""Measure a model on the toy task: sample responses with HF ``generate`` and average the toy rewards.

Used by the asset build (to print the warm-started model's rates) and by the tests. Generation is the project's
one helper, ``gdpo_verl.generation.hf_generate`` (one left-padded batch ``(n_problems * samples, prompt_len)``,
responses cut at eos and decoded as verl's reward loop does); responses are scored by ``gdpo_verl.demo.rewards``.
``python -m gdpo_verl.tools.evaluate --task demo`` reports the same greedy rates on the val split.
Run ``python -m gdpo_verl.demo.evaluate MODEL_DIR`` to print the rates of a saved model.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from transformers import PreTrainedModel, PreTrainedTokenizerBase

from gdpo_verl.demo.rewards import REWARD_KEYS, compute_score
from gdpo_verl.demo.task import Problem
from gdpo_verl.demo.threads import torch_threads
from gdpo_verl.generation import hf_generate

MAX_NEW_TOKENS = 16


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

    One batch through ``gdpo_verl.generation.hf_generate``, on ``threads`` torch threads (``gdpo_verl.demo.threads``).
    """
    prompts = [[{"role": "user", "content": p.question}] for p in problems]
    with torch_threads(threads):
        generations = hf_generate(model, tokenizer, prompts, MAX_NEW_TOKENS, temperature, samples, seed)
    return [g.text for g in generations]


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
