"""Pre-flight checks of a run: what verl would hit after Ray starts, found in seconds before it does.

``check_run(cfg)`` (called by ``python -m gdpo_verl.main`` before Ray starts, and all a ``launch.dry_run=true``
does besides verl's own config checks) raises ``ValueError`` naming the setting and the fix, else returns a
:class:`Preflight` whose ``summary()`` is printed:

* the model: ``actor_rollout_ref.model.path`` a local directory, or a Hugging Face hub name that loads (from the
  cache in offline mode, ``HF_HUB_OFFLINE=1``); a local-looking path that does not exist is "no such directory",
  not a hub lookup; its ``max_position_embeddings`` against ``data.max_prompt_length + data.max_response_length``;
* the data: every ``data.train_files`` / ``data.val_files`` readable, with its row count;
* the prompts: each training prompt's length in tokens, built as verl's ``RLHFDataset`` builds it
  (``apply_chat_template(prompt, add_generation_prompt=True)`` with ``data.apply_chat_template_kwargs``); with
  ``data.filter_overlong_prompts=true`` how many survive ``data.max_prompt_length`` (none is an error naming the
  shortest and the setting), with ``data.truncation=error`` a prompt over it is an error (verl would raise
  mid-run);
* the steps: ``surviving prompts // data.train_batch_size`` per epoch (verl drops the last partial batch), times
  ``trainer.total_epochs`` unless ``trainer.total_training_steps`` is set; zero is an error;
* the resources: ``trainer.nnodes x trainer.n_gpus_per_node``, checked against the visible GPUs on one node.

Batch-size divisibility is verl's own ``validate_config`` (run by ``gdpo_verl.main.validate``). Multi-modal
prompts (a ``processor``) and tool schemas are not modelled: their lengths are the text's.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

REMOTE_PREFIXES = ("hdfs://", "s3://", "gs://")  # copied by verl's copy_to_local: not checked here


@dataclass(frozen=True)
class Preflight:
    """What the run will use. ``prompt_lengths`` are token counts of the training prompts, (n,) in file order."""

    model: str
    model_source: str
    max_positions: int | None
    train_rows: tuple[tuple[str, int], ...]
    val_rows: tuple[tuple[str, int], ...]
    prompts_total: int
    prompts_kept: int
    longest_prompt: int
    steps: int
    steps_per_epoch: int
    batch: str
    rollout: str
    rewards: tuple[tuple[str, float], ...]
    resources: str

    def summary(self) -> str:
        files = lambda rows: ", ".join(f"{p} ({n} rows)" for p, n in rows) or "-"  # noqa: E731
        positions = f", {self.max_positions} positions" if self.max_positions else ""
        rewards = ", ".join(f"{n} x{w:g}" for n, w in self.rewards) or "(the reward manager's)"
        return "\n".join(
            [
                f"  model     {self.model} ({self.model_source}{positions})",
                f"  train     {files(self.train_rows)}",
                f"  val       {files(self.val_rows)}",
                f"  prompts   {self.prompts_kept} of {self.prompts_total} fit (longest {self.longest_prompt} tokens)",
                f"  steps     {self.steps} ({self.steps_per_epoch} per epoch)",
                f"  batch     {self.batch}",
                f"  rollout   {self.rollout}",
                f"  rewards   {rewards}",
                f"  resources {self.resources}",
            ]
        )


def _as_list(files) -> list[str]:
    if files is None:
        return []
    if isinstance(files, str):
        return [files]
    return [str(f) for f in (OmegaConf.to_container(files) if OmegaConf.is_config(files) else files)]


def looks_local(path: str) -> bool:
    """A path a user meant as a folder: absolute, ``./``, ``../``, ``~``, or more than one ``/`` (a hub name has
    at most one: ``org/name``)."""
    return path.startswith(("/", "./", "../", "~")) or path in (".", "..") or path.count("/") > 1


def resolve_model(path: str, trust_remote_code: bool = False):
    """``(config, source)`` of a model path: a local folder or a hub name (offline mode honoured)."""
    import transformers

    local = Path(path).expanduser()
    if local.is_dir():
        source = "local directory"
    elif looks_local(path):
        raise ValueError(
            f"actor_rollout_ref.model.path={path!r}: no such directory. Fix the path, or give a Hugging Face hub "
            "name (org/name)"
        )
    else:
        source = "Hugging Face hub"
    try:
        config = transformers.AutoConfig.from_pretrained(path, trust_remote_code=trust_remote_code)
    except (OSError, ValueError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ValueError(
            f"actor_rollout_ref.model.path={path!r} ({source}): the model's config does not load: {first}. Fix: a "
            "local model directory, or a hub name that is reachable (or cached, with HF_HUB_OFFLINE=1); download "
            f"it first with `hf download {path}`"
        ) from None
    return config, source


def _max_positions(config) -> int | None:
    text = getattr(config, "text_config", None) or config
    value = getattr(text, "max_position_embeddings", None)
    return int(value) if isinstance(value, int) else None


def row_counts(key: str, files: Sequence[str]) -> tuple[tuple[str, int], ...]:
    """``((path, rows), ...)`` from the parquet footers; ValueError naming the setting and the file."""
    import pyarrow.parquet as pq

    out = []
    for name in files:
        path = Path(name).expanduser()
        if str(name).startswith(REMOTE_PREFIXES):
            continue
        if not path.is_file():
            raise ValueError(
                f"{key}: {name} does not exist. Prepare the data first (python -m gdpo_verl.data_prep.<task>)"
            )
        try:
            out.append((str(name), pq.ParquetFile(path).metadata.num_rows))
        except Exception as err:  # pyarrow raises several types for a file that is not parquet
            raise ValueError(f"{key}: {name} is not a readable parquet file ({type(err).__name__}: {err})") from None
    return tuple(out)


def prompt_lengths(tokenizer, files: Sequence[str], prompt_key: str, chat_kwargs: dict) -> list[int]:
    """Token count of every prompt in ``files``, as verl's ``RLHFDataset`` builds it (chat template, generation
    prompt); ValueError naming the file and row of a prompt the template refuses."""
    import pyarrow.parquet as pq

    kwargs = {k: v for k, v in chat_kwargs.items() if k not in ("tokenize", "return_dict", "return_tensors")}
    lengths: list[int] = []
    for name in files:
        table = pq.read_table(Path(name).expanduser(), columns=[prompt_key])
        prompts = table.column(prompt_key).to_pylist()
        try:
            ids = tokenizer.apply_chat_template(prompts, add_generation_prompt=True, tokenize=True, **kwargs)
        except Exception as err:
            raise ValueError(
                f"data.train_files: {name}: the tokenizer's chat template fails on the column {prompt_key!r} "
                f"(data.prompt_key): {type(err).__name__}: {err}"
            ) from None
        if isinstance(ids, dict) or hasattr(ids, "keys"):  # a BatchEncoding
            ids = ids["input_ids"]
        lengths.extend(len(x) for x in ids)
    return lengths


@contextlib.contextmanager
def _quiet_transformers():
    """transformers' "Token indices sequence length is longer than ..." notes: the checks below say it better."""
    from transformers.utils import logging

    level = logging.get_verbosity()
    logging.set_verbosity_error()
    try:
        yield
    finally:
        logging.set_verbosity(level)


def count_steps(kept: int, cfg: DictConfig) -> tuple[int, int]:
    """``(steps, steps_per_epoch)`` as verl's trainers compute them (drop_last=True)."""
    batch = int(cfg.data.train_batch_size)
    per_epoch = kept // batch
    if per_epoch == 0:
        raise ValueError(
            f"{kept} training prompts fit, fewer than data.train_batch_size={batch}: verl's dataloader drops the "
            "partial batch, so the run has no step. Lower data.train_batch_size or add data"
        )
    total = cfg.trainer.get("total_training_steps")
    return (int(total) if total else per_epoch * int(cfg.trainer.total_epochs)), per_epoch


def check_resources(cfg: DictConfig, on_cpu: bool) -> str:
    nodes, per_node = int(cfg.trainer.nnodes), int(cfg.trainer.n_gpus_per_node)
    if on_cpu:
        return f"{nodes} node x {per_node} CPU training process(es)"
    import torch

    visible = torch.cuda.device_count()
    if nodes == 1 and not cfg.ray_kwargs.ray_init.get("address") and visible < per_node:
        raise ValueError(
            f"trainer.n_gpus_per_node={per_node} but this machine shows {visible} GPU(s). Set "
            f"trainer.n_gpus_per_node={max(visible, 1)} (batch sizes must still divide), or launch.device=cpu"
        )
    return f"{nodes} node(s) x {per_node} GPUs"


def check_run(cfg: DictConfig, on_cpu: bool) -> Preflight:
    """Every check above, in the order a run would meet them; the first failure raises."""
    model = str(cfg.actor_rollout_ref.model.path)
    trust = bool(cfg.actor_rollout_ref.model.get("trust_remote_code", False))
    remote = model.startswith(REMOTE_PREFIXES)
    config, source = (None, "remote, not checked") if remote else resolve_model(model, trust)
    max_positions = _max_positions(config) if config is not None else None
    data = cfg.data
    max_prompt, max_response = int(data.max_prompt_length), int(data.max_response_length)
    if max_positions and max_prompt + max_response > max_positions:
        raise ValueError(
            f"data.max_prompt_length + data.max_response_length = {max_prompt} + {max_response} = "
            f"{max_prompt + max_response} exceeds the model's max_position_embeddings={max_positions} ({model}). "
            "Lower them so the sum fits"
        )
    train_files, val_files = _as_list(data.train_files), _as_list(data.get("val_files"))
    train_rows = row_counts("data.train_files", train_files)
    val_rows = row_counts("data.val_files", val_files)
    for key, rows in (("data.train_files", train_rows), ("data.val_files", val_rows)):
        for name, n in rows:
            if n == 0:
                raise ValueError(f"{key}: {name} has no rows")
    total = sum(n for _, n in train_rows)
    lengths: list[int] = []
    if config is not None and train_rows:
        import transformers

        with _quiet_transformers():
            tokenizer = transformers.AutoTokenizer.from_pretrained(model, trust_remote_code=trust)
            chat = data.get("apply_chat_template_kwargs")
            chat = OmegaConf.to_container(chat) if OmegaConf.is_config(chat) else dict(chat or {})
            files = [p for p, _ in train_rows]
            lengths = prompt_lengths(tokenizer, files, data.get("prompt_key", "prompt"), chat)
    kept = total
    if lengths:
        fitting = sum(n <= max_prompt for n in lengths)
        longest = max(range(len(lengths)), key=lengths.__getitem__)
        if data.get("filter_overlong_prompts", False):
            kept = fitting
            if kept == 0:
                raise ValueError(
                    f"no training prompt fits data.max_prompt_length={max_prompt} tokens: the shortest has "
                    f"{min(lengths)}, the longest {lengths[longest]} (row {longest}); verl would filter them all "
                    "out (data.filter_overlong_prompts=true). Raise data.max_prompt_length"
                )
        elif fitting < len(lengths) and data.get("truncation", "error") == "error":
            raise ValueError(
                f"{len(lengths) - fitting} of {len(lengths)} training prompts are longer than "
                f"data.max_prompt_length={max_prompt} tokens (the longest: row {longest}, {lengths[longest]} tokens) "
                "and data.truncation=error makes verl raise on them. Raise data.max_prompt_length, or set "
                "data.filter_overlong_prompts=true (drop them) or data.truncation=left|right"
            )
    steps, per_epoch = count_steps(kept, cfg)
    algo, rollout = cfg.algorithm, cfg.actor_rollout_ref.rollout
    keys = list(algo.get("gdpo_reward_keys") or [])
    weights = list(algo.get("gdpo_reward_weights") or [1.0] * len(keys))
    return Preflight(
        model=model,
        model_source=source,
        max_positions=max_positions,
        train_rows=train_rows,
        val_rows=val_rows,
        prompts_total=total,
        prompts_kept=kept,
        longest_prompt=max(lengths) if lengths else 0,
        steps=steps,
        steps_per_epoch=per_epoch,
        batch=f"{data.train_batch_size} prompts x {rollout.n} samples, {algo.adv_estimator}",
        rollout=str(rollout.name),
        rewards=tuple(zip(keys, (float(w) for w in weights))),
        resources=check_resources(cfg, on_cpu),
    )
