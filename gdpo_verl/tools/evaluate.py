"""Evaluate checkpoints on a task's test split with the paper's metrics; a markdown table, a CSV and a bar chart.

Run (from the repository root):
    python -m gdpo_verl.tools.evaluate --task bfcl RUN_GDPO RUN_GRPO                # BFCL (the paper's metric)
    python -m gdpo_verl.tools.evaluate --task toolcall RUN_GDPO RUN_GRPO            # verl runs, side by side
    python -m gdpo_verl.tools.evaluate --task deepscaler GDPO_S0 GDPO_S1 GRPO_S0 GRPO_S1   # seeds: mean and 95% CI
    python -m gdpo_verl.tools.evaluate --task deepscaler CKPT --samples 16 --temperature 0.6 --top-p 0.95
    python -m gdpo_verl.tools.evaluate --task gsm8k Qwen/Qwen2.5-1.5B-Instruct --label base --limit 200
    python -m gdpo_verl.tools.evaluate --task demo                                  # the CPU demo's model

A CHECKPOINT is a Hugging Face model (a directory with ``config.json`` and weights, or a hub name), or a verl
checkpoint directory: ``<dir>/global_step_N/actor/huggingface`` (the latest N, from
``latest_checkpointed_iteration.txt`` when present), ``<dir>/checkpoints/...`` of a ``gdpo_verl.main`` run, or a
``global_step_N`` directory. verl writes the model's weights there only with
``actor_rollout_ref.actor.checkpoint.save_contents=[model,optimizer,extra,hf_model]``; otherwise merge the shards
first (``python -m verl.model_merger merge --backend fsdp --local_dir <step>/actor --target_dir <out>``).
Its label is ``--label`` (one per checkpoint, in order), else ``<method>-seed<N>`` from the run's saved Hydra
config (``.hydra/config.yaml`` in the checkpoint's directory or a parent), else the directory's name.

Data: ``--data`` (a parquet file written by ``data_prep``: columns ``data_source``, ``prompt`` (chat list),
``reward_model.ground_truth``, ``extra_info``), default ``$GDPO_DATA/<task>/test.parquet`` (the demo: its val
split). ``--limit N`` keeps the first N rows. Each row's prompt goes through the model's chat template.

Metrics (percent of all responses, ``samples`` per problem; ``n`` = responses scored):
- bfcl: BFCL through bfcl-eval's own AST checker and data, offline (``gdpo_verl.tools.bfcl``; ``--data`` is not
  used, ``--limit N`` keeps the first N entries of each category): ``accuracy`` per category, ``non_live`` and
  ``live`` (the unweighted mean of their categories' accuracies), ``overall`` (the mean of those two), and
  ``format`` (the training format reward with the layout each entry calls for: a call, or a response only).
- toolcall: ``format`` (format reward 1) and ``accuracy`` (exact tool-call match: correctness reward 3) on the
  rlla test split (the training run's validation set).
- gsm8k: ``accuracy``, ``format``, ``integer`` (the three rewards of ``gdpo_verl.rewards.gsm8k``).
- deepscaler: ``accuracy`` (math-verify, ``gdpo_verl.rewards.math_answer``) and ``over_length`` (responses longer
  than ``--length-budget`` tokens, default 4000 as in the recipe).
- code: ``pass@1`` (every one of the problem's tests passes: all of them are run) and ``bug_ratio`` (responses
  whose program crashes on at least one test, or that hold no program), in the sandbox.
- demo: ``format``, ``correctness``, ``brevity`` (``gdpo_verl.demo.rewards``).
With ``--samples k`` > 1 every metric is avg@k (the mean over the k samples of each problem, the unbiased pass@1
estimate), and the task's correctness metric also gets ``pass@k`` (problems with at least one correct sample).

Generation: per-task defaults (``DECODING``): greedy for bfcl, toolcall, gsm8k and the demo; temperature 0.6,
top_p 0.95 for deepscaler (16 samples: avg@16, pass@16) and code (1 sample), the DeepScaleR recipe's validation
setting. ``--temperature``, ``--top-p`` and ``--samples`` override them. vLLM when ``--backend auto`` finds it and
a GPU (one engine per checkpoint), else Hugging Face ``generate`` (``gdpo_verl.generation``) with a progress bar.

Seeds: checkpoints whose labels differ only in ``-seed<N>`` (``gdpo-seed0``, ``gdpo-seed1``) are runs of one
method; for each method with two or more, a column gives the mean over them and the half-width of its 95%
confidence interval (Student's t with n - 1 degrees of freedom): ``31.20 ± 1.05 (n=3)``.
Output under ``--out`` (default ``eval-<task>``): ``results.md`` (also printed), ``results.csv``, ``results.png``.
Where the paper reports a number for the task, a reference column holds it, labelled with its benchmark.
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from gdpo_verl.core.choices import check_choice
from gdpo_verl.generation import Generation, hf_generate, vllm_available, vllm_generate

BACKENDS = ("auto", "hf", "vllm")


def _toolcall(response: Generation, ground_truth: str, budget: int) -> dict[str, float]:
    from gdpo_verl.rewards import toolcall

    return {
        "format": toolcall.format_reward(response.text, ground_truth),
        "accuracy": float(toolcall.correctness_reward(response.text, ground_truth) == toolcall.MAX_CORRECTNESS),
    }


def _gsm8k(response: Generation, ground_truth: str, budget: int) -> dict[str, float]:
    from gdpo_verl.rewards import gsm8k

    return {
        "accuracy": gsm8k.correctness_reward(response.text, ground_truth),
        "format": gsm8k.format_reward(response.text, ground_truth),
        "integer": gsm8k.integer_reward(response.text, ground_truth),
    }


def _deepscaler(response: Generation, ground_truth: str, budget: int) -> dict[str, float]:
    from gdpo_verl.rewards import length, math_answer

    return {
        "accuracy": math_answer.correctness_reward(response.text, ground_truth),
        "over_length": 1.0 - length.length_reward(response.text, response_length=response.tokens, max_tokens=budget),
    }


def _code(response: Generation, ground_truth: str, budget: int) -> dict[str, float]:
    from gdpo_verl.rewards import code_tests

    # every test of the problem (the training reward samples at most 16), with time for all of them
    result = code_tests.evaluate(response.text, ground_truth, max_tests=sys.maxsize, budget_s=600.0)
    return {"pass@1": float(result.pass_rate >= 1.0), "bug_ratio": float(result.buggy > 0)}


def _bfcl(response: Generation, item, budget: int) -> dict[str, float]:
    from gdpo_verl.rewards import toolcall
    from gdpo_verl.tools import bfcl

    right = float(bfcl.verdict(item, response.text))
    layout = (
        "<think>x</think>\n<response>x</response>"
        if item.category in bfcl.NO_CALL_CATEGORIES
        else ("<think>x</think>\n<tool_call>\n{}\n</tool_call>")
    )
    per_category = {category: math.nan for category in bfcl.CATEGORIES}
    per_category[item.category] = right
    return {"accuracy": right, "format": toolcall.format_reward(response.text, layout), **per_category}


def _bfcl_summary(result: dict[str, float]) -> dict[str, float]:
    """BFCL's summary rows: unweighted means of the categories' accuracies (categories not evaluated are left out)."""
    from gdpo_verl.tools import bfcl

    def mean(categories):
        values = [result[c] for c in categories if not math.isnan(result.get(c, math.nan))]
        return sum(values) / len(values) if values else math.nan

    non_live, live = mean(bfcl.NON_LIVE), mean(bfcl.LIVE)
    overall = [v for v in (non_live, live) if not math.isnan(v)]
    return {"non_live": non_live, "live": live, "overall": sum(overall) / len(overall) if overall else math.nan}


def _demo(response: Generation, ground_truth: str, budget: int) -> dict[str, float]:
    from gdpo_verl.demo.rewards import REWARD_KEYS, compute_score

    scores = compute_score("", response.text, ground_truth)
    return {key: scores[key] for key in REWARD_KEYS}


@dataclass(frozen=True)
class Task:
    """How to score one task: metric names (in table order), the scorer, the generation budget, paper numbers."""

    metrics: tuple[str, ...]
    score: Callable[[Generation, str, int], dict[str, float]]
    max_new_tokens: int
    # metric -> (column label, "GRPO -> GDPO" as the paper reports it)
    paper: dict[str, str] = field(default_factory=dict)
    paper_label: str = ""
    correct: str | None = None  # the metric that says "this sample is right": it gets pass@k with k samples
    summary: Callable[[dict[str, float]], dict[str, float]] | None = None  # derived rows from the scored metrics


def _bfcl_task() -> Task:
    from gdpo_verl.tools.bfcl import CATEGORIES

    return Task(
        ("overall", "non_live", "live", "format", *CATEGORIES),
        _bfcl,
        1024,
        {"overall": "GRPO 30.18 / GDPO 32.81", "format": "GRPO 76.33 / GDPO 80.66"},
        "paper (BFCL-v3 avg, Qwen2.5-1.5B)",
        correct="accuracy",
        summary=_bfcl_summary,
    )


TASKS: dict[str, Task] = {
    "bfcl": _bfcl_task(),
    "toolcall": Task(
        ("format", "accuracy"),
        _toolcall,
        1024,
        {"format": "GRPO 76.33 / GDPO 80.66", "accuracy": "GRPO 30.18 / GDPO 32.81"},
        "paper (BFCL-v3, Qwen2.5-1.5B; a different benchmark than this split)",
        correct="accuracy",
    ),
    "gsm8k": Task(("accuracy", "format", "integer"), _gsm8k, 1024, correct="accuracy"),
    "deepscaler": Task(
        ("accuracy", "over_length"),
        _deepscaler,
        8000,
        {"accuracy": "GRPO 23.1 / GDPO 29.4"},
        "paper (AIME, DeepSeek-R1-1.5B)",
        correct="accuracy",
    ),
    "code": Task(("pass@1", "bug_ratio"), _code, 8000, correct="pass@1"),
    "demo": Task(("format", "correctness", "brevity"), _demo, 16, correct="correctness"),
}
# (temperature, top_p, samples) per task when --temperature / --top-p / --samples are not given (module docstring)
DECODING: dict[str, tuple[float, float, int]] = {
    "bfcl": (0.0, 1.0, 1),
    "toolcall": (0.0, 1.0, 1),
    "gsm8k": (0.0, 1.0, 1),
    "deepscaler": (0.6, 0.95, 16),
    "code": (0.6, 0.95, 1),
    "demo": (0.0, 1.0, 1),
}
# Student's t quantile 0.975 for 1..30 degrees of freedom (95% two-sided); beyond, the normal's 1.96
T_975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
         2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045,
         2.042)  # fmt: skip


def run_checkpoint_dir(run: Path) -> Path | None:
    """Where a ``gdpo_verl.main`` run directory's checkpoints went: ``trainer.default_local_dir`` of its saved Hydra
    config (``${oc.env:GDPO_CKPT,...}`` resolved now; a relative ``checkpoints/...`` lands in the run directory).
    None when ``run`` holds no saved config."""
    from omegaconf import OmegaConf

    saved = run / ".hydra" / "config.yaml"
    if not saved.is_file():
        return None
    cfg = OmegaConf.load(saved)
    try:
        where = str(OmegaConf.select(cfg, "trainer.default_local_dir", throw_on_resolution_failure=True) or "")
    except Exception:  # a resolver this process lacks: the directory cannot be told
        return None
    if not where:
        return None
    return run / "checkpoints" if where.startswith("checkpoints/") else Path(where).expanduser()


def _no_checkpoint_error(checkpoint: str, run: Path) -> ValueError:
    where = run_checkpoint_dir(run)
    saved = (
        f"its checkpoints go to {where} (trainer.default_local_dir), which holds no global_step_* folder"
        if where
        else "it holds no checkpoint"
    )
    return ValueError(
        f"{checkpoint} is a training run directory, but {saved}. verl saves one every trainer.save_freq steps (the "
        "demo's default -1 saves none): train with trainer.save_freq=N and "
        "actor_rollout_ref.actor.checkpoint.save_contents=[model,optimizer,extra,hf_model], then pass the run "
        "directory or its checkpoint folder"
    )


def find_model(checkpoint: str) -> str:
    """The Hugging Face model directory (or hub name) of a checkpoint argument; ValueError when it has no weights.

    A ``gdpo_verl.main`` run directory leads to its checkpoint folder (``trainer.default_local_dir``, e.g. under
    ``$GDPO_CKPT``); a local-looking path that does not exist is an error, not a hub lookup."""
    from gdpo_verl.preflight import looks_local

    path = Path(checkpoint).expanduser()
    if not path.exists():
        if looks_local(checkpoint):
            raise ValueError(f"{checkpoint}: no such directory (give a checkpoint folder, a run folder or a hub name)")
        return checkpoint  # a hub name: transformers (or vLLM) resolves it
    if (path / ".hydra" / "config.yaml").is_file():  # a run directory: follow it to where its checkpoints went
        where = run_checkpoint_dir(path)
        if where is not None and where.is_dir() and where != path:
            path = where
    if (path / "config.json").is_file() and _has_weights(path):
        return str(path)
    for root in (path, path / "checkpoints"):
        steps = sorted(root.glob("global_step_*"), key=lambda p: int(p.name.rsplit("_", 1)[1]))
        latest = root / "latest_checkpointed_iteration.txt"
        if latest.is_file():
            steps = [root / f"global_step_{latest.read_text().strip()}"]
        if steps:
            path = steps[-1]
            break
    for candidate in (path / "actor" / "huggingface", path / "huggingface"):
        if candidate.is_dir():
            if _has_weights(candidate):
                return str(candidate)
            raise ValueError(
                f"{candidate} has no model weights (verl saved only config and tokenizer): train with "
                "actor_rollout_ref.actor.checkpoint.save_contents=[model,optimizer,extra,hf_model], or merge: "
                f"python -m verl.model_merger merge --backend fsdp --local_dir {candidate.parent} --target_dir OUT"
            )
    run = Path(checkpoint).expanduser()
    if (run / ".hydra" / "config.yaml").is_file() or (run / "metrics.jsonl").is_file():
        raise _no_checkpoint_error(checkpoint, run)
    raise ValueError(f"{checkpoint}: neither a Hugging Face model directory nor a verl checkpoint directory")


def _has_weights(path: Path) -> bool:
    return any(path.glob("*.safetensors")) or any(path.glob("pytorch_model*.bin"))


def checkpoint_label(checkpoint: str) -> str:
    """``<method>-seed<N>`` from the run's saved Hydra config above the checkpoint, else the directory name."""
    from gdpo_verl.tools.plot import run_identity

    path = Path(checkpoint)
    if not path.exists():
        return checkpoint.rstrip("/").rsplit("/", 1)[-1]
    for parent in (path.resolve(), *path.resolve().parents):
        if (parent / ".hydra" / "config.yaml").is_file():
            method, seed = run_identity(parent / "metrics.jsonl")
            return method if seed is None else f"{method}-seed{seed}"
    return path.resolve().name


def load_rows(data: str | Path | None, limit: int | None, task: str = "") -> tuple[list[list[dict]], list]:
    """(chat prompts, ground truths) of a verl RL parquet file, the first ``limit`` rows when given; for ``bfcl``
    the BFCL entries inside bfcl-eval (``limit`` per category) as prompts and ``BFCLItem`` ground truths."""
    if task == "bfcl":
        from gdpo_verl.tools import bfcl

        items = bfcl.load_items(limit=limit)
        return [bfcl.chat_prompt(item) for item in items], items
    frame = pd.read_parquet(data)
    if limit is not None:
        frame = frame.head(limit)
    prompts = [[dict(turn) for turn in prompt] for prompt in frame["prompt"]]
    truths = [row["ground_truth"] for row in frame["reward_model"]]
    return prompts, truths


def generate(
    model_path: str,
    prompts: Sequence[Sequence[dict]],
    max_new_tokens: int,
    temperature: float,
    samples: int,
    seed: int,
    backend: str,
    batch_size: int,
    top_p: float = 1.0,
) -> list[Generation]:
    """``samples`` responses per prompt (prompt-major) from one model."""
    use_vllm = backend == "vllm" or (backend == "auto" and vllm_available())
    if use_vllm:  # pragma: no cover - needs a GPU and vLLM
        return vllm_generate(model_path, prompts, max_new_tokens, temperature, samples, seed, top_p=top_p)
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = AutoModelForCausalLM.from_pretrained(model_path).to(device).eval()
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return hf_generate(
        model, tokenizer, prompts, max_new_tokens, temperature, samples, seed, batch_size, progress=True, top_p=top_p
    )


def score_each(task: Task, generations: Sequence[Generation], truths: Sequence, budget: int) -> list[dict]:
    """Each response's metrics (``samples`` consecutive responses per ground truth)."""
    samples = len(generations) // max(1, len(truths))
    return [task.score(g, truths[i // samples], budget) for i, g in enumerate(generations)]


def score(task: Task, generations: Sequence[Generation], truths: Sequence, budget: int) -> dict[str, float]:
    """:func:`aggregate` of :func:`score_each`."""
    return aggregate(task, score_each(task, generations, truths, budget), len(truths))


def aggregate(task: Task, per: Sequence[dict], problems: int) -> dict[str, float]:
    """Percent per metric, avg@k over the ``samples`` consecutive responses of each of ``problems`` ground truths
    (a metric a response does not apply to is NaN there and left out), ``pass@k`` of the task's correctness metric
    when k > 1, the task's summary rows, and ``n`` (responses scored)."""
    import numpy as np

    samples = len(per) // max(1, problems)
    scored = {m: np.array([p.get(m, np.nan) for p in per], dtype=np.float64) for m in per[0]} if per else {}
    result = {}
    for metric, values in scored.items():
        kept = values[~np.isnan(values)]
        result[metric] = 100.0 * float(kept.mean()) if kept.size else math.nan
    if task.correct and samples > 1 and per:
        right = scored[task.correct].reshape(problems, samples) > 0  # (problems, k)
        result[f"pass@{samples}"] = 100.0 * float(right.any(axis=1).mean())
    if task.summary and per:
        result.update(task.summary(result))
    metrics = [*task.metrics, *([f"pass@{samples}"] if task.correct and samples > 1 else [])]
    return {**{m: result.get(m, math.nan) for m in metrics}, "n": float(len(per))}


def method_of(label: str) -> str:
    """The method part of a run label: ``gdpo-seed2`` -> ``gdpo`` (labels without ``-seed<N>`` stand alone)."""
    head, sep, tail = label.rpartition("-seed")
    return head if sep and tail.isdigit() else label


def seed_summary(labels: Sequence[str], results: Sequence[dict[str, float]]) -> dict[str, dict[str, tuple]]:
    """{method: {metric: (mean, 95% CI half-width, n)}} for each method with two or more seeds."""
    import statistics

    groups: dict[str, list[dict[str, float]]] = {}
    for label, result in zip(labels, results):
        groups.setdefault(method_of(label), []).append(result)
    summary = {}
    for method, runs in groups.items():
        if len(runs) < 2:
            continue
        summary[method] = {}
        for metric in runs[0]:
            values = [r[metric] for r in runs if not math.isnan(r[metric])]
            if len(values) < 2:
                summary[method][metric] = (values[0] if values else math.nan, math.nan, len(values))
                continue
            t = T_975[len(values) - 2] if len(values) - 1 <= len(T_975) else 1.96
            half = t * statistics.stdev(values) / math.sqrt(len(values))
            summary[method][metric] = (statistics.fmean(values), half, len(values))
    return summary


def save_generations(path: Path, prompts, truths, generations: Sequence[Generation], per: Sequence[dict]) -> Path:
    """One JSON line per response: problem index, sample index, the prompt's last message, ground truth, response
    text, its token count and its metrics (``--save-generations``: what was scored, to inspect a surprising
    result)."""
    import json

    samples = len(generations) // max(1, len(truths))
    with open(path, "w", encoding="utf-8") as f:
        for i, (g, metrics) in enumerate(zip(generations, per)):
            problem = i // samples
            record = {
                "problem": problem,
                "sample": i % samples,
                "prompt": prompts[problem][-1].get("content") if prompts[problem] else None,
                "ground_truth": truths[problem] if isinstance(truths[problem], str) else str(truths[problem]),
                "response": g.text,
                "tokens": g.tokens,
                "metrics": metrics,
            }
            f.write(json.dumps(record) + "\n")
    return path


def tables(task: Task, labels: Sequence[str], results: Sequence[dict[str, float]]) -> tuple[str, list[list[str]]]:
    """The markdown table and the CSV rows: one row per metric, one column per checkpoint, one per method with
    several seeds (mean ± 95% CI half-width), and the paper's where it reports the task."""
    seeds = seed_summary(labels, results)
    header = [
        "metric (%)",
        *labels,
        *(f"{m} (mean ± 95% CI)" for m in seeds),
        *([task.paper_label] if task.paper else []),
    ]
    rows = []
    for metric in (*[m for m in results[0] if m != "n"], "n") if results else ("n",):
        values = [f"{r[metric]:.0f}" if metric == "n" else f"{r[metric]:.2f}" for r in results]
        for stats in seeds.values():
            mean, half, n = stats[metric]
            values.append(f"{mean:.0f}" if metric == "n" else f"{mean:.2f} ± {half:.2f} (n={n})")
        rows.append([metric, *values, *([task.paper.get(metric, "")] if task.paper else [])])
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n", [header, *rows]


def bar_chart(task_name: str, task: Task, labels: Sequence[str], results: Sequence[dict[str, float]], out: Path):
    """Grouped bars: one group per metric, one bar per checkpoint (PNG, matplotlib Agg)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(1.8 + 1.6 * len(task.metrics) * max(1, len(labels)) / 2, 3.6))
    width = 0.8 / max(1, len(labels))
    for i, (label, result) in enumerate(zip(labels, results)):
        xs = [m + (i - (len(labels) - 1) / 2) * width for m in range(len(task.metrics))]
        bars = ax.bar(xs, [result[m] for m in task.metrics], width, label=label)
        ax.bar_label(bars, fmt="%.1f", fontsize=8)
    ax.set_xticks(range(len(task.metrics)), task.metrics, rotation=30 if len(task.metrics) > 4 else 0)
    ax.set_ylabel("% of responses")
    ax.set_ylim(0, 105)
    ax.set_title(f"{task_name}: n = {int(results[0]['n']) if results else 0} responses per checkpoint")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)


def evaluate(
    task_name: str,
    checkpoints: Sequence[str],
    data: str | Path,
    labels: Sequence[str] | None = None,
    out_dir: str | Path | None = None,
    limit: int | None = None,
    samples: int | None = None,
    temperature: float | None = None,
    seed: int = 0,
    backend: str = "auto",
    batch_size: int = 16,
    max_new_tokens: int | None = None,
    length_budget: int = 4000,
    top_p: float | None = None,
    keep_generations: bool = False,
) -> tuple[list[str], list[dict[str, float]], str]:
    """Score every checkpoint; write the tables and the chart when ``out_dir`` is given. Returns (labels, results,
    markdown). ``temperature``, ``top_p``, ``samples``: None takes the task's ``DECODING`` default. With
    ``keep_generations``, ``generations-<i>-<label>.jsonl`` per checkpoint holds each response and its metrics."""
    task = TASKS[check_choice("--task", task_name, tuple(TASKS))]
    check_choice("--backend", backend, BACKENDS)
    default_t, default_p, default_k = DECODING[task_name]
    temperature = default_t if temperature is None else temperature
    top_p = default_p if top_p is None else top_p
    samples = (default_k if temperature > 0 else 1) if samples is None else samples
    if samples < 1 or temperature < 0 or (temperature == 0 and samples > 1):
        raise ValueError(f"--samples {samples} --temperature {temperature}: samples >= 1, and > 1 only when sampling")
    if not 0 < top_p <= 1:
        raise ValueError(f"--top-p {top_p}: must be in (0, 1] (1: no nucleus cut)")
    if labels and len(labels) != len(checkpoints):
        raise ValueError(f"give one --label per checkpoint ({len(checkpoints)}), got {len(labels)}")
    if keep_generations and out_dir is None:
        raise ValueError("--save-generations needs an output folder (--out)")
    labels = list(labels) if labels else [checkpoint_label(c) for c in checkpoints]
    models = [find_model(c) for c in checkpoints]  # every checkpoint resolved before the first one generates
    prompts, truths = load_rows(data, limit, task_name)
    results = []
    for i, (checkpoint, label, model) in enumerate(zip(checkpoints, labels, models)):
        print(f"[evaluate] {label}: {len(prompts)} prompts x {samples} from {checkpoint}", file=sys.stderr)
        budget = max_new_tokens or task.max_new_tokens
        generations = generate(model, prompts, budget, temperature, samples, seed, backend, batch_size, top_p)
        per = score_each(task, generations, truths, length_budget)
        results.append(aggregate(task, per, len(truths)))
        if keep_generations:
            Path(out_dir).mkdir(parents=True, exist_ok=True)
            name = re.sub(r"[^A-Za-z0-9._-]+", "_", label)
            kept = save_generations(Path(out_dir) / f"generations-{i}-{name}.jsonl", prompts, truths, generations, per)
            print(f"[evaluate] {label}: responses and their metrics in {kept}", file=sys.stderr)
    markdown, csv_rows = tables(task, labels, results)
    if out_dir is not None:
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        (out / "results.md").write_text(markdown)
        with open(out / "results.csv", "w", newline="") as f:
            csv.writer(f).writerows(csv_rows)
        bar_chart(task_name, task, labels, results, out / "results.png")
    return labels, results, markdown


def default_data(task: str) -> str:
    """``$GDPO_DATA/<task>/test.parquet`` (default ``~/data/gdpo``); the demo's val split for ``demo``."""
    if task == "demo":
        from gdpo_verl.demo.assets import ensure_demo_assets

        return ensure_demo_assets(log=lambda m: print(m, file=sys.stderr)).val_parquet
    if task == "bfcl":
        return None  # the data ships inside bfcl-eval
    root = os.environ.get("GDPO_DATA") or str(Path.home() / "data" / "gdpo")
    return str(Path(root) / task / "test.parquet")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m gdpo_verl.tools.evaluate",
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("checkpoints", nargs="*", help="verl checkpoint dirs or HF models (demo: default its model)")
    parser.add_argument("--task", required=True, help=f"one of: {', '.join(TASKS)}")
    parser.add_argument("--label", action="append", help="one per checkpoint, in order")
    parser.add_argument("--data", help="test parquet (default $GDPO_DATA/<task>/test.parquet)")
    parser.add_argument("--out", help="output folder (default eval-<task>)")
    parser.add_argument("--limit", type=int, help="first N rows only")
    parser.add_argument("--samples", type=int, help="responses per problem, k of avg@k/pass@k (default: per task)")
    parser.add_argument("--temperature", type=float, help="0: greedy (default: per task, see DECODING)")
    parser.add_argument("--top-p", type=float, help="nucleus sampling (default: per task)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--backend", default="auto", help=f"one of: {', '.join(BACKENDS)} (auto: vLLM on a GPU)")
    parser.add_argument("--batch-size", type=int, default=16, help="HF generate: rows per batch")
    parser.add_argument("--max-new-tokens", type=int, help="default: the recipe's max_response_length")
    parser.add_argument("--length-budget", type=int, default=4000, help="deepscaler over_length budget (tokens)")
    parser.add_argument("--save-generations", action="store_true",
                        help="write every response with its metrics to OUT/generations-<i>-<label>.jsonl")  # fmt: skip
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    check_choice("--task", args.task, tuple(TASKS))
    checkpoints = args.checkpoints
    if not checkpoints:
        if args.task != "demo":
            raise SystemExit("give at least one checkpoint (a verl checkpoint directory or a Hugging Face model)")
        from gdpo_verl.demo.assets import ensure_demo_assets

        checkpoints = [ensure_demo_assets(log=lambda m: print(m, file=sys.stderr)).model_dir]
        args.label = args.label or ["demo warm start"]
    _, _, markdown = evaluate(
        args.task,
        checkpoints,
        args.data or default_data(args.task),
        labels=args.label,
        out_dir=args.out or f"eval-{args.task}",
        limit=args.limit,
        samples=args.samples,
        temperature=args.temperature,
        seed=args.seed,
        backend=args.backend,
        batch_size=args.batch_size,
        max_new_tokens=args.max_new_tokens,
        length_budget=args.length_budget,
        top_p=args.top_p,
        keep_generations=args.save_generations,
    )
    print(markdown)


if __name__ == "__main__":
    main()
