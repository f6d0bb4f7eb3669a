"""Evaluate checkpoints on a task's test split with the paper's metrics; a markdown table, a CSV and a bar chart.

Run (from the repository root):
    python -m gdpo_verl.tools.evaluate --task toolcall RUN_GDPO RUN_GRPO            # verl runs, side by side
    python -m gdpo_verl.tools.evaluate --task deepscaler CKPT --samples 16 --temperature 0.6
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
- toolcall: ``format`` (format reward 1) and ``accuracy`` (exact tool-call match: correctness reward 3).
- gsm8k: ``accuracy``, ``format``, ``integer`` (the three rewards of ``gdpo_verl.rewards.gsm8k``).
- deepscaler: ``accuracy`` (math-verify, ``gdpo_verl.rewards.math_answer``) and ``over_length`` (responses longer
  than ``--length-budget`` tokens, default 4000 as in the recipe).
- code: ``pass@1`` (every test passes) and ``bug_ratio`` (mean fraction of test runs that crash), in the sandbox.
- demo: ``format``, ``correctness``, ``brevity`` (``gdpo_verl.demo.rewards``).
With ``--samples`` > 1, pass@1 and accuracy are the mean over samples (the unbiased pass@1 estimate).

Generation: greedy by default (``--temperature 0``); vLLM when ``--backend auto`` finds it and a GPU (one engine
per checkpoint), else Hugging Face ``generate`` (``gdpo_verl.generation``) with a progress bar on stderr.
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

    result = code_tests.evaluate(response.text, ground_truth)
    return {"pass@1": float(result.pass_rate >= 1.0), "bug_ratio": 1.0 - result.bug_free}


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


TASKS: dict[str, Task] = {
    "toolcall": Task(
        ("format", "accuracy"),
        _toolcall,
        1024,
        {"format": "GRPO 76.33 / GDPO 80.66", "accuracy": "GRPO 30.18 / GDPO 32.81"},
        "paper (BFCL-v3, Qwen2.5-1.5B; a different benchmark than this split)",
    ),
    "gsm8k": Task(("accuracy", "format", "integer"), _gsm8k, 1024),
    "deepscaler": Task(
        ("accuracy", "over_length"),
        _deepscaler,
        8000,
        {"accuracy": "GRPO 23.1 / GDPO 29.4"},
        "paper (AIME, DeepSeek-R1-1.5B)",
    ),
    "code": Task(("pass@1", "bug_ratio"), _code, 8000),
    "demo": Task(("format", "correctness", "brevity"), _demo, 16),
}


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


def load_rows(data: str | Path, limit: int | None) -> tuple[list[list[dict]], list[str]]:
    """(chat prompts, ground truths) of a verl RL parquet file, the first ``limit`` rows when given."""
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
) -> list[Generation]:
    """``samples`` responses per prompt (prompt-major) from one model."""
    use_vllm = backend == "vllm" or (backend == "auto" and vllm_available())
    if use_vllm:  # pragma: no cover - needs a GPU and vLLM
        return vllm_generate(model_path, prompts, max_new_tokens, temperature, samples, seed)
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = AutoModelForCausalLM.from_pretrained(model_path).to(device).eval()
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return hf_generate(model, tokenizer, prompts, max_new_tokens, temperature, samples, seed, batch_size, progress=True)


def score_each(task: Task, generations: Sequence[Generation], truths: Sequence[str], budget: int) -> list[dict]:
    """Each response's metrics (``samples`` consecutive responses per ground truth)."""
    samples = len(generations) // max(1, len(truths))
    return [task.score(g, truths[i // samples], budget) for i, g in enumerate(generations)]


def score(task: Task, generations: Sequence[Generation], truths: Sequence[str], budget: int) -> dict[str, float]:
    """Percent of responses per metric (``samples`` consecutive responses per ground truth), plus ``n``."""
    return aggregate(task, score_each(task, generations, truths, budget))


def aggregate(task: Task, per: Sequence[dict]) -> dict[str, float]:
    """Per-response metrics -> percent of responses per metric, plus ``n``."""
    result = {m: 100.0 * sum(p[m] for p in per) / len(per) if per else math.nan for m in task.metrics}
    return {**result, "n": float(len(per))}


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
    """The markdown table and the CSV rows: one row per metric, one column per checkpoint (+ the paper's)."""
    header = ["metric (%)", *labels, *([task.paper_label] if task.paper else [])]
    rows = []
    for metric in (*task.metrics, "n"):
        values = [f"{r[metric]:.0f}" if metric == "n" else f"{r[metric]:.2f}" for r in results]
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
    ax.set_xticks(range(len(task.metrics)), task.metrics)
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
    samples: int = 1,
    temperature: float = 0.0,
    seed: int = 0,
    backend: str = "auto",
    batch_size: int = 16,
    max_new_tokens: int | None = None,
    length_budget: int = 4000,
    keep_generations: bool = False,
) -> tuple[list[str], list[dict[str, float]], str]:
    """Score every checkpoint; write the tables and the chart when ``out_dir`` is given (and, with
    ``keep_generations``, ``generations-<i>-<label>.jsonl`` per checkpoint). Returns (labels, results, markdown)."""
    task = TASKS[check_choice("--task", task_name, tuple(TASKS))]
    check_choice("--backend", backend, BACKENDS)
    if samples < 1 or temperature < 0 or (temperature == 0 and samples > 1):
        raise ValueError(f"--samples {samples} --temperature {temperature}: samples >= 1, and > 1 only when sampling")
    if labels and len(labels) != len(checkpoints):
        raise ValueError(f"give one --label per checkpoint ({len(checkpoints)}), got {len(labels)}")
    if keep_generations and out_dir is None:
        raise ValueError("--save-generations needs an output folder (--out)")
    labels = list(labels) if labels else [checkpoint_label(c) for c in checkpoints]
    models = [find_model(c) for c in checkpoints]  # every checkpoint resolved before the first one generates
    prompts, truths = load_rows(data, limit)
    results = []
    for i, (checkpoint, label, model) in enumerate(zip(checkpoints, labels, models)):
        print(f"[evaluate] {label}: {len(prompts)} prompts x {samples} from {checkpoint}", file=sys.stderr)
        budget = max_new_tokens or task.max_new_tokens
        generations = generate(model, prompts, budget, temperature, samples, seed, backend, batch_size)
        per = score_each(task, generations, truths, length_budget)
        results.append(aggregate(task, per))
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
    parser.add_argument("--samples", type=int, default=1, help="responses per problem (needs --temperature > 0)")
    parser.add_argument("--temperature", type=float, default=0.0, help="0: greedy (default)")
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
        keep_generations=args.save_generations,
    )
    print(markdown)


if __name__ == "__main__":
    main()
