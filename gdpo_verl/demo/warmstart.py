"""Supervised warm start ("SFT") of the demo model on deliberately noisy demonstrations.

RL needs a policy that sometimes succeeds and has room to improve. A random model never writes
``<a>7</a>``; a fully trained one always does. So the warm start imitates a mixture
(``DemoMix`` in ``gdpo_verl.demo.settings``):
each demonstration's layout is well formed with probability ``p_well_formed`` (else one of
``MALFORMED_LAYOUTS``), it carries a ``"3+4=7 "`` working prefix with probability ``p_verbose`` (which
the brevity reward penalises), and its number is the right sum with probability ``p_correct`` (else a
uniformly drawn wrong sum). Two phases, seeded, fresh demonstrations every step:

1. ``clean_steps`` steps with right sums only (layouts still mixed) at ``lr``: the model learns the
   100 facts, so greedy decoding mostly answers right.
2. ``noisy_steps`` steps with the full mix at the lower ``noisy_lr``: sampling at temperature 1 now
   often picks a wrong sum, while the right one stays the most likely.

RL then raises format, correctness and brevity by sharpening what the model half knows.
Plain torch loop: AdamW, cross-entropy on response tokens only, batches ``(batch_size, <= 21)`` tokens,
one torch thread. The default 700 steps take about 40 s on one CPU core.
Run ``python -m gdpo_verl.demo.warmstart`` to warm-start a fresh random model and print its reward rates.
"""

from __future__ import annotations

import dataclasses
import random
import time
from collections.abc import Callable, Sequence

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from gdpo_verl.demo.rewards import ANSWER_CLOSE, ANSWER_OPEN
from gdpo_verl.demo.settings import DemoMix, WarmStartConfig
from gdpo_verl.demo.task import Problem
from gdpo_verl.demo.threads import torch_threads

MALFORMED_LAYOUTS = ("{v}", ANSWER_OPEN + "{v}", ANSWER_OPEN + "{v}" + ANSWER_CLOSE + ".", "a={v}")
MAX_SUM = 18
IGNORE_INDEX = -100


def sample_demonstration(problem: Problem, rng: random.Random, mix: DemoMix | None = None) -> str:
    """One noisy demonstration for ``problem``, e.g. ``"<a>7</a>"``, ``"3+4=9 <a>9</a>"`` or ``"<a>7"``.

    ``mix`` defaults to ``DemoMix()``.

    >>> sample_demonstration(Problem(3, 4), random.Random(0), DemoMix(1.0, 1.0, 0.0))
    '<a>7</a>'
    """
    mix = mix if mix is not None else DemoMix()
    value = int(problem.answer)
    if rng.random() >= mix.p_correct:
        value = rng.choice([v for v in range(MAX_SUM + 1) if v != value])
    if rng.random() < mix.p_well_formed:
        body = f"{ANSWER_OPEN}{value}{ANSWER_CLOSE}"
    else:
        body = rng.choice(MALFORMED_LAYOUTS).format(v=value)
    prefix = f"{problem.a}+{problem.b}={value} " if rng.random() < mix.p_verbose else ""
    return prefix + body


def prompt_ids(tokenizer: PreTrainedTokenizerBase, problem: Problem) -> list[int]:
    """Token ids of the chat-templated prompt, generation prompt included."""
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": problem.question}], add_generation_prompt=True, tokenize=False
    )
    return tokenizer(text, add_special_tokens=False)["input_ids"]


class Collator:
    """Turns (problem, response) pairs into a right-padded training batch, caching tokenizations.

    ``collator(problems, responses)`` returns ``input_ids``/``attention_mask``/``labels`` of shape
    ``(batch, max_len)``: each row is prompt + response + eos; ``labels`` hold the response and eos ids
    and ``IGNORE_INDEX`` on prompt and padding positions.
    """

    def __init__(self, tokenizer: PreTrainedTokenizerBase):
        self.tokenizer = tokenizer
        self._prompts: dict[Problem, list[int]] = {}
        self._responses: dict[str, list[int]] = {}

    def _prompt(self, problem: Problem) -> list[int]:
        if problem not in self._prompts:
            self._prompts[problem] = prompt_ids(self.tokenizer, problem)
        return self._prompts[problem]

    def _response(self, response: str) -> list[int]:
        if response not in self._responses:
            ids = self.tokenizer(response, add_special_tokens=False)["input_ids"]
            self._responses[response] = ids + [self.tokenizer.eos_token_id]
        return self._responses[response]

    def __call__(self, problems: Sequence[Problem], responses: Sequence[str]) -> dict[str, torch.Tensor]:
        rows, labels = [], []
        for problem, response in zip(problems, responses):
            prompt, answer = self._prompt(problem), self._response(response)
            rows.append(prompt + answer)
            labels.append([IGNORE_INDEX] * len(prompt) + answer)
        width = max(len(r) for r in rows)
        pad = self.tokenizer.pad_token_id
        return {
            "input_ids": torch.tensor([r + [pad] * (width - len(r)) for r in rows]),
            "attention_mask": torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows]),
            "labels": torch.tensor([r + [IGNORE_INDEX] * (width - len(r)) for r in labels]),
        }


def _lr_factor(config: WarmStartConfig, step: int) -> float:
    """Multiplier of ``config.lr`` at ``step``: linear decay to 0 within each phase; phase 2 starts at noisy_lr."""
    if step < config.clean_steps:
        return 1.0 - step / config.clean_steps
    return config.noisy_lr / config.lr * (1.0 - (step - config.clean_steps) / max(config.noisy_steps, 1))


def warm_start(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    problems: Sequence[Problem],
    config: WarmStartConfig | None = None,
    log: Callable[[str], None] = print,
) -> list[float]:
    """Train ``model`` in place on noisy demonstrations of ``problems``; returns the per-step losses.

    ``config`` defaults to ``WarmStartConfig()``; progress lines go to ``log``.
    """
    config = config if config is not None else WarmStartConfig()
    rng = random.Random(config.seed)
    torch.manual_seed(config.seed)
    collate = Collator(tokenizer)
    clean_mix = dataclasses.replace(config.mix, p_correct=1.0)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: _lr_factor(config, step))
    losses, start = [], time.monotonic()
    model.train()
    try:
        with torch_threads(config.threads):
            for step in range(config.steps):
                batch_problems = [rng.choice(problems) for _ in range(config.batch_size)]
                mix = clean_mix if step < config.clean_steps else config.mix
                responses = [sample_demonstration(p, rng, mix) for p in batch_problems]
                loss = model(**collate(batch_problems, responses)).loss
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
                schedule.step()
                losses.append(loss.item())
                if (step + 1) % max(config.steps // 5, 1) == 0:
                    elapsed = time.monotonic() - start
                    log(f"  warm start step {step + 1}/{config.steps}: loss {losses[-1]:.3f} ({elapsed:.0f} s)")
    finally:
        model.eval()
    return losses


if __name__ == "__main__":
    from gdpo_verl.demo.evaluate import reward_rates
    from gdpo_verl.demo.model import build_model
    from gdpo_verl.demo.task import all_problems
    from gdpo_verl.demo.tokenizer import build_tokenizer

    tok = build_tokenizer()
    lm = build_model(tok)
    warm_start(lm, tok, all_problems())
    for temperature in (1.0, 0.0):
        print(f"temperature {temperature}: {reward_rates(lm, tok, all_problems(), temperature=temperature)}")
