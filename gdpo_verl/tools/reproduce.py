"""One command from training to the paper's table: the method sweep over seeds, the evaluation of every final
checkpoint, and the table (markdown, CSV, PNG) with each method's mean and 95% interval over seeds.

Run (from the repository root; Hydra overrides for every training run go last):
    python -m gdpo_verl.tools.reproduce --task toolcall --seeds 0 1 2                 # 9 runs, then BFCL
    python -m gdpo_verl.tools.reproduce --task deepscaler --seeds 0 1 2 --methods gdpo grpo
    python -m gdpo_verl.tools.reproduce --task demo --seeds 0 1 trainer.total_training_steps=2   # the CPU demo

For each method (``--methods``, default the paper's three: gdpo, grpo, grpo_nostd) and seed, one training run
``python -m gdpo_verl.main --config-name <task> method=<m> seed=<s> launch.output_dir=<out>/runs/<m>-seed<s>``
(one after another; each saves its final model as Hugging Face weights). A run whose output directory already
holds a final model is not trained again (``--retrain`` to redo it), so an interrupted sweep resumes. Then
``gdpo_verl.tools.evaluate`` scores every final checkpoint on the task's evaluation (tool calling: BFCL with its
own checker; the others: their test split) with the task's decoding defaults (``--limit``, ``--samples``,
``--temperature``, ``--top-p`` override them) and writes ``<out>/table/results.{md,csv,png}``: one column per run,
one per method with mean ± 95% CI over its seeds, and the paper's numbers where it reports the task.

Output: ``<out>`` (default ``reproduce-<task>``) with ``runs/<method>-seed<N>/`` (metrics.jsonl, checkpoints,
train.log) and ``table/``. A failing run stops the sweep with its log's last lines.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from gdpo_verl.core.choices import check_choice
from gdpo_verl.core.methods import METHOD_NAMES

TASKS = ("toolcall", "gsm8k", "deepscaler", "code", "demo")
METHODS = METHOD_NAMES  # recipes/method/
PAPER_METHODS = ("gdpo", "grpo", "grpo_nostd")  # the paper's comparison: the default sweep
EVAL_TASK = {"toolcall": "bfcl", "gsm8k": "gsm8k", "deepscaler": "deepscaler", "code": "code", "demo": "demo"}
SAVE_HF = "actor_rollout_ref.actor.checkpoint.save_contents=[model,optimizer,extra,hf_model]"


def train_command(task: str, method: str, seed: int, run_dir: Path, overrides: Sequence[str]) -> list[str]:
    """The training command of one sweep point (the final model saved as Hugging Face weights); every recipe
    selects the method group in its defaults (``method=``)."""
    return [
        sys.executable, "-m", "gdpo_verl.main", "--config-name", task,
        f"method={method}", f"seed={seed}", f"launch.output_dir={run_dir}", SAVE_HF, *overrides,
    ]  # fmt: skip


def has_final_model(run_dir: Path) -> bool:
    """Whether a run directory holds a final model in Hugging Face format (a missing one: no)."""
    from gdpo_verl.tools.evaluate import find_model

    if not run_dir.is_dir():  # find_model passes a non-existing path through as a hub name
        return False
    try:
        find_model(str(run_dir))
    except ValueError:
        return False
    return True


def train(task: str, method: str, seed: int, run_dir: Path, overrides: Sequence[str], retrain: bool) -> None:
    """Train one sweep point unless its final model is there; RuntimeError with the log's tail when it fails."""
    if not retrain and has_final_model(run_dir):
        print(f"[reproduce] {run_dir.name}: final model present, not retrained", file=sys.stderr)
        return
    run_dir.mkdir(parents=True, exist_ok=True)
    log = run_dir / "train.log"
    print(f"[reproduce] training {run_dir.name} (log: {log})", file=sys.stderr)
    with open(log, "w") as out:
        done = subprocess.run(
            train_command(task, method, seed, run_dir, overrides), stdout=out, stderr=subprocess.STDOUT
        )
    if done.returncode != 0 or not has_final_model(run_dir):
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-30:])
        raise RuntimeError(
            f"training {run_dir.name} failed (exit {done.returncode}; no final model under {run_dir}): "
            f"see {log}\n{tail}"
        )


def reproduce(
    task: str,
    seeds: Sequence[int],
    methods: Sequence[str] = PAPER_METHODS,
    out: str | Path | None = None,
    overrides: Sequence[str] = (),
    retrain: bool = False,
    **eval_options,
) -> str:
    """Train every (method, seed), evaluate the final checkpoints, write the table; returns its markdown."""
    from gdpo_verl.tools.evaluate import default_data, evaluate

    check_choice("--task", task, TASKS)
    for method in methods:
        check_choice("--methods", method, METHODS)
    if not seeds or len(set(seeds)) != len(seeds):
        raise ValueError(f"--seeds {list(seeds)}: give one or more distinct seeds")
    root = Path(out or f"reproduce-{task}")
    points = [(method, seed, root / "runs" / f"{method}-seed{seed}") for method in methods for seed in seeds]
    for method, seed, run_dir in points:
        train(task, method, seed, run_dir, overrides, retrain)
    eval_task = EVAL_TASK[task]
    _, _, markdown = evaluate(
        eval_task,
        [str(run_dir) for _, _, run_dir in points],
        default_data(eval_task),
        labels=[run_dir.name for _, _, run_dir in points],
        out_dir=root / "table",
        **eval_options,
    )
    return markdown


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m gdpo_verl.tools.reproduce",
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--task", required=True, help=f"one of: {', '.join(TASKS)}")
    parser.add_argument("--seeds", type=int, nargs="+", required=True, help="e.g. 0 1 2")
    parser.add_argument(
        "--methods", nargs="+", default=list(PAPER_METHODS),
        help=f"from: {', '.join(METHODS)} (default: the paper's {' '.join(PAPER_METHODS)})",
    )  # fmt: skip
    parser.add_argument("--out", help="output folder (default reproduce-<task>)")
    parser.add_argument("--retrain", action="store_true", help="train again runs that already have a final model")
    parser.add_argument("--limit", type=int, help="evaluation: first N rows (BFCL: per category)")
    parser.add_argument("--samples", type=int, help="evaluation: samples per problem (default: per task)")
    parser.add_argument("--temperature", type=float, help="evaluation: default per task")
    parser.add_argument("--top-p", type=float, help="evaluation: default per task")
    parser.add_argument("--backend", default="auto", help="evaluation: auto | hf | vllm")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides for every training run")
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    try:
        markdown = reproduce(
            args.task,
            args.seeds,
            args.methods,
            args.out,
            args.overrides,
            args.retrain,
            limit=args.limit,
            samples=args.samples,
            temperature=args.temperature,
            top_p=args.top_p,
            backend=args.backend,
        )
    except (ValueError, RuntimeError) as exc:
        raise SystemExit(str(exc)) from None
    print(markdown)


if __name__ == "__main__":
    main()
