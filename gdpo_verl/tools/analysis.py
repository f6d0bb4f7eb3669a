"""Count distinct advantage groups under every method (the paper's Figure 3, extended), exhaustively or on a batch.

Run (from the repository root):
    python -m gdpo_verl.tools.analysis distinct                                   # K=2, G=2-8, CSV on stdout
    python -m gdpo_verl.tools.analysis distinct --rewards 2 --rollouts 2-16 --format markdown
    python -m gdpo_verl.tools.analysis distinct --rewards 2-4 --rollouts 2-8 --plot docs/distinct_groups.png
    python -m gdpo_verl.tools.analysis batch batch.parquet --rewards format,correctness   # a saved batch

``distinct``: binary rewards. For K rewards and G rollouts it enumerates every unordered multiset of G reward
vectors from {0,1}^K (C(2^K + G - 1, G) groups; the G=2, K=2 case has 10). Each group is one batch of G
responses sharing a uid; its advantage vector (G,) is computed per method with the project's own estimator
math (``gdpo_verl.core.advantage.group_normalize``, verl's GRPO semantics: unbiased std, eps 1e-6, a group whose
values are all equal gets zeros):
    grpo         sum the rewards (weights first), then normalize in the group: (s - mean) / (std + eps)
    grpo_nostd   sum the rewards, subtract the group mean only (the paper's "GRPO w/o std")
    gdpo         normalize each reward in the group, then sum with the weights (before the batch-wise step: one
                 affine map shared by all groups of a batch, so it cannot change which groups of a batch differ)
    gd2po        GDPO's per-reward step, responses whose per-reward advantages disagree in sign set to 0, each
                 group scaled by its kept share (the ``method=gd2po`` preset: sign filter, prompt weight)
    saw          GDPO with SAW's coefficient-of-variation weights over the batch. In ``distinct`` the batch is the
                 whole cell, which is symmetric in the rewards (permuting the rewards maps the set of multisets
                 onto itself, so every reward has the same values across it): every CV is equal, SAW's weights are
                 one common factor, and its counts are GDPO's; ``distinct`` computes it so (the test suite checks
                 the claim against SAW on whole small cells). On a real batch (``batch``) the weights differ.
    rvpo         RVPO's soft minimum (risk k=1, the preset) of the per-reward z-scores
The methods are ``gdpo_verl.core.methods.response_advantages``, the function the trainer's
``gdpo/collapse/distinct_*`` counts use.
Each vector is rounded to 1e-4 and sorted (a group is an unordered multiset); the count of unique vectors,
the all-zero vector included, is reported. All groups of a cell go through ``group_normalize`` in a few
large calls ((num_groups * G, K) tensors, chunked to bound memory), so K=6, G=4 (766,480 groups) takes seconds.
Output columns (CSV): ``method,num_rewards,num_rollouts,distinct_groups``.

``batch FILE``: the same count on a real batch saved by the user, e.g. from a verl DataProto::
    pd.DataFrame({"uid": batch.non_tensor_batch["uid"], "format": ..., "correctness": ...}).to_parquet(FILE)
FILE is .parquet, .jsonl (one object per line) or .npz (one array per column; string uids, not objects), or an
estimator dump that a training run writes with ``algorithm.gdpo_dump_dir=DIR`` (``DIR/estimator-*.pt``, one per
step: uids and the per-reward scores the estimator saw)::
    python -m gdpo_verl.main trainer.total_training_steps=2 algorithm.gdpo_dump_dir=dumps
    python -m gdpo_verl.tools.analysis batch "$(ls dumps/estimator-*.pt | tail -n 1)"   # the last step
It reports per method the number of distinct group vectors (groups may differ in size) and of distinct
per-response values (``gdpo_verl.core.metrics.distinct_values``, the same count the trainer logs as
``gdpo/collapse/distinct_*``). Missing rewards (NaN/null) abstain under GDPO and count as 0 in GRPO's sum.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import numpy as np
import torch

from gdpo_verl.core.advantage import group_index, weight_vector
from gdpo_verl.core.choices import check_choice
from gdpo_verl.core.contract import RewardSettings
from gdpo_verl.core.methods import response_advantages
from gdpo_verl.core.metrics import distinct_values

METHODS = ("grpo", "grpo_nostd", "gdpo", "gd2po", "saw", "rvpo")
FORMATS = ("csv", "markdown")
DISTINCT_FORMATS = (*FORMATS, "markdown-wide")  # markdown-wide: one line per (K, G), one column per method
DISTINCT_COLUMNS = ("method", "num_rewards", "num_rollouts", "distinct_groups")
BATCH_COLUMNS = ("method", "num_rewards", "num_groups", "num_responses", "distinct_groups", "distinct_values")
BATCH_SUFFIXES = (".parquet", ".jsonl", ".npz", ".pt")
DECIMALS = 4  # rounding to 1e-4, as gdpo/collapse/distinct_* does
EPSILON = 1e-6  # verl's GRPO epsilon
CHUNK_ROWS = 1 << 19  # responses (groups * G) per group_normalize call; bounds peak memory to ~0.3 GB at K=6
MAX_GROUPS = 50_000_000  # refuse cells beyond this (K=4, G=16 would be 300 million groups)
PROGRESS_GROUPS = 200_000  # report progress on stderr when a run enumerates more groups than this
PROGRESS_EVERY_S = 1.0  # at most one progress line a second per cell (plus its "done" line)


def method_advantages(
    scores: torch.Tensor,
    group: torch.Tensor,
    num_groups: int,
    method: str,
    weights: Sequence[float] | torch.Tensor | None = None,
    *,
    epsilon: float = EPSILON,
) -> torch.Tensor:
    """Per-response advantage (bs,) float64 of ``method`` before any batch-wise step.

    scores: (bs, K) raw rewards (NaN = missing); group: (bs,) int64 dense group index in [0, num_groups).
    The trainer's own function, ``gdpo_verl.core.methods.response_advantages``, with each preset's options.
    """
    check_choice("method", method, METHODS)
    w = weight_vector(weights, scores)
    if w.shape != (scores.shape[1],):
        raise ValueError(f"need one weight per reward ({scores.shape[1]}); got {tuple(w.shape)}")
    reward = RewardSettings(tuple(f"r{k}" for k in range(scores.shape[1])), tuple(w.tolist()), epsilon=epsilon)
    return response_advantages(method, reward, scores, group)


def binary_vectors(num_rewards: int) -> torch.Tensor:
    """All 2^K reward vectors in {0,1}^K, (2^K, K) float64, row i = the bits of i (reward 0 = high bit)."""
    codes = torch.arange(2**num_rewards).unsqueeze(1)
    shifts = torch.arange(num_rewards - 1, -1, -1)
    return ((codes >> shifts) & 1).to(torch.float64)


def num_multisets(num_items: int, size: int) -> int:
    """Number of multisets of ``size`` items drawn from ``num_items`` kinds: C(num_items + size - 1, size)."""
    return math.comb(num_items + size - 1, size)


def _extend(rows: np.ndarray, num_items: int) -> np.ndarray:
    """(m, j) nondecreasing rows -> (m', j + 1): every row extended by each value >= its last one, in order."""
    if rows.shape[1] == 0:
        return np.arange(num_items, dtype=np.int64).reshape(-1, 1).repeat(rows.shape[0], axis=0)
    last = rows[:, -1]
    counts = num_items - last
    starts = np.cumsum(counts) - counts
    values = np.repeat(last - starts, counts) + np.arange(int(counts.sum()), dtype=np.int64)
    return np.concatenate([np.repeat(rows, counts, axis=0), values[:, None]], axis=1)


def iter_multisets(num_items: int, size: int, chunk: int = 1 << 16) -> Iterator[np.ndarray]:
    """All multisets of ``size`` items from ``range(num_items)`` as nondecreasing rows, lexicographic order.

    Yields int64 arrays (m, size) with m <= max(``chunk``, 1); their concatenation has
    ``num_multisets(num_items, size)`` rows. Built a column at a time with numpy (no Python loop over rows).
    """
    if size < 1 or num_items < 1:
        raise ValueError(f"need size >= 1 and num_items >= 1; got size={size}, num_items={num_items}")
    # completions[r][v]: number of ways to append r more values >= v (a row whose last value is v).
    completions = {r: np.array([num_multisets(num_items - v, r) for v in range(num_items)]) for r in range(size + 1)}

    def walk(rows: np.ndarray) -> Iterator[np.ndarray]:
        remaining = size - rows.shape[1]
        if remaining == 0:  # only reached when one row's completions exceeded the chunk
            for first in range(0, rows.shape[0], max(chunk, 1)):
                yield rows[first : first + max(chunk, 1)]
            return
        need = completions[remaining][rows[:, -1]] if rows.shape[1] else np.array([num_multisets(num_items, size)])
        if need.sum() <= chunk:
            for _ in range(remaining):
                rows = _extend(rows, num_items)
            yield rows
        elif rows.shape[0] == 1:
            yield from walk(_extend(rows, num_items))
        else:  # greedy split into runs of consecutive rows totalling <= chunk (or one row)
            first, total = 0, 0
            for i, n in enumerate(need.tolist()):
                if total + n > chunk and i > first:
                    yield from walk(rows[first:i])
                    first, total = i, 0
                total += n
            yield from walk(rows[first:])

    yield from walk(np.zeros((1, 0), dtype=np.int64))


def quantize(values: torch.Tensor) -> torch.Tensor:
    """Round to ``DECIMALS`` places as int64 multiples of 10**-DECIMALS (same shape), so -0.0 and 0.0 agree."""
    return torch.round(values.to(torch.float64) * 10**DECIMALS).to(torch.int64)


def unique_rows(rows: np.ndarray) -> np.ndarray:
    """The distinct rows of an int64 array (n, m), in lexicographic order (one ``np.lexsort``, exact)."""
    if rows.shape[0] == 0:
        return rows
    rows = rows[np.lexsort(rows.T[::-1])]
    keep = np.ones(rows.shape[0], dtype=bool)
    keep[1:] = (rows[1:] != rows[:-1]).any(axis=1)
    return rows[keep]


def unique_group_vectors(
    adv: torch.Tensor, group: torch.Tensor | None = None, num_groups: int | None = None
) -> np.ndarray:
    """Distinct group-advantage vectors: int64 rows in units of 10**-DECIMALS, values sorted ascending.

    adv: (num_groups, G) when ``group`` is None (one row per group, all groups of size G); else (bs,)
    per-response values with group: (bs,) dense index and groups of any size, and a row is
    (group size, sorted values..., int64-max padding), so groups of different sizes never match.
    """
    if group is None:
        return unique_rows(torch.sort(quantize(adv), dim=1).values.numpy())
    if num_groups is None:
        raise ValueError("num_groups is required with group")
    values = quantize(adv)
    order = torch.sort(values, stable=True).indices
    order = order[torch.sort(group[order], stable=True).indices]  # by group, then by value
    sizes = torch.bincount(group, minlength=num_groups)
    starts = torch.cumsum(sizes, 0) - sizes
    g = group[order]
    position = torch.arange(g.numel()) - starts[g]
    rows = torch.full((num_groups, int(sizes.max()) + 1), torch.iinfo(torch.int64).max, dtype=torch.int64)
    rows[:, 0] = sizes
    rows[g, position + 1] = values[order]
    return unique_rows(rows.numpy())


def count_distinct_groups(
    num_rewards: int,
    num_rollouts: int,
    methods: Sequence[str] = METHODS,
    weights: Sequence[float] | None = None,
    *,
    epsilon: float = EPSILON,
    chunk_rows: int = CHUNK_ROWS,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, int]:
    """{method: number of distinct advantage vectors} over all multisets of G binary reward vectors of length K.

    Each chunk of m multisets becomes scores (m * G, K) with group index (m * G,) = [0]*G + [1]*G + ...;
    ``method_advantages`` runs once per method and chunk. ``progress(done_groups, total_groups)`` is called
    after each chunk.
    """
    if num_rewards < 1 or num_rollouts < 2:
        raise ValueError(f"need num_rewards >= 1 and num_rollouts >= 2; got K={num_rewards}, G={num_rollouts}")
    for method in methods:
        check_choice("method", method, METHODS)
    vectors = binary_vectors(num_rewards)
    total = num_multisets(len(vectors), num_rollouts)
    seen: dict[str, list[np.ndarray]] = {method: [] for method in methods}
    done = 0
    for multisets in iter_multisets(len(vectors), num_rollouts, chunk=max(chunk_rows // num_rollouts, 1)):
        m = multisets.shape[0]
        scores = vectors[torch.from_numpy(multisets).reshape(-1)]  # (m * G, K)
        group = torch.arange(m).repeat_interleave(num_rollouts)  # (m * G,)
        for method in methods:
            # saw over the whole cell is GDPO up to a common factor (module docstring); per chunk it would not be
            as_method = "gdpo" if method == "saw" else method
            adv = method_advantages(scores, group, m, as_method, weights, epsilon=epsilon).view(m, num_rollouts)
            seen[method].append(unique_group_vectors(adv))
        done += m
        if progress is not None:
            progress(done, total)
    return {method: int(unique_rows(np.concatenate(seen[method])).shape[0]) for method in methods}


def _cell_reporter(progress: Callable[[str], None], k: int, g: int) -> Callable[[int, int], None]:
    """A ``count_distinct_groups`` progress callback for cell (K, G): a line a second, and one when done."""
    start = last = time.perf_counter()

    def report(done: int, total: int) -> None:
        nonlocal last
        now = time.perf_counter()
        if done == total or now - last >= PROGRESS_EVERY_S:
            last = now
            state = "done" if done == total else "..."
            progress(f"K={k} G={g}: {done:,}/{total:,} groups {state} ({now - start:.1f}s)")

    return report


def distinct_table(
    rewards: Sequence[int],
    rollouts: Sequence[int],
    methods: Sequence[str] = METHODS,
    weights: Sequence[float] | None = None,
    *,
    progress: Callable[[str], None] | None = None,
) -> list[dict]:
    """Rows {method, num_rewards, num_rollouts, distinct_groups}, method-major then K then G.

    ``progress(line)`` receives human-readable lines: at most one a second while a cell runs, one when it is done.
    """
    counts: dict[tuple[int, int], dict[str, int]] = {}
    for k in rewards:
        for g in rollouts:
            report = None if progress is None else _cell_reporter(progress, k, g)
            counts[(k, g)] = count_distinct_groups(k, g, methods, weights, progress=report)
    return [
        {"method": m, "num_rewards": k, "num_rollouts": g, "distinct_groups": counts[(k, g)][m]}
        for m in methods
        for k in rewards
        for g in rollouts
    ]


def format_rows(rows: Sequence[dict], columns: Sequence[str], fmt: str) -> str:
    """Rows -> CSV (header = ``columns`` exactly) or a GitHub markdown table; ends with a newline."""
    check_choice("format", fmt, FORMATS)
    cells = [[str(row[c]) for c in columns] for row in rows]
    if fmt == "csv":
        return "\n".join(",".join(line) for line in [list(columns), *cells]) + "\n"
    widths = [max(len(c), *(len(line[i]) for line in cells)) if cells else len(c) for i, c in enumerate(columns)]
    numeric = [all(line[i].lstrip("-").isdigit() for line in cells) and bool(cells) for i in range(len(columns))]

    def line(values: Sequence[str]) -> str:
        return "| " + " | ".join(v.rjust(w) if n else v.ljust(w) for v, w, n in zip(values, widths, numeric)) + " |"

    rule = "|" + "|".join(("-" * (w + 1) + ":") if n else ("-" * (w + 2)) for w, n in zip(widths, numeric)) + "|"
    return "\n".join([line(columns), rule, *(line(c) for c in cells)]) + "\n"


def distinct_pivot_markdown(rows: Sequence[dict]) -> str:
    """Wide markdown table for a README: one line per (K, G), one column per method."""
    methods = list(dict.fromkeys(r["method"] for r in rows))
    cells: dict[tuple[int, int], dict[str, int]] = {}
    for r in rows:
        cells.setdefault((r["num_rewards"], r["num_rollouts"]), {})[r["method"]] = r["distinct_groups"]
    wide = [{"K": k, "G": g, **values} for (k, g), values in sorted(cells.items())]
    return format_rows(wide, ["K", "G", *methods], "markdown")


def plot_distinct(rows: Sequence[dict], out_png: str | Path) -> Path:
    """Figure-3-style plot: distinct groups vs G (one panel per K), or vs K when G is fixed; log y axis."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    methods = list(dict.fromkeys(r["method"] for r in rows))
    ks = sorted({r["num_rewards"] for r in rows})
    gs = sorted({r["num_rollouts"] for r in rows})
    by_g = len(gs) > 1
    panels = ks if by_g else gs
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.6), squeeze=False)
    from gdpo_verl.tools.plot import METHOD_COLOURS, METHOD_LINES, METHOD_MARKERS, METHOD_NAMES

    for ax, fixed in zip(axes[0], panels):
        for i, m in enumerate(methods):
            key = "num_rewards" if by_g else "num_rollouts"
            sel = sorted(
                (r for r in rows if r["method"] == m and r[key] == fixed),
                key=lambda r: (r["num_rollouts"], r["num_rewards"]),
            )
            xs = [r["num_rollouts"] if by_g else r["num_rewards"] for r in sel]
            ax.plot(xs, [r["distinct_groups"] for r in sel], marker=METHOD_MARKERS.get(m, "d"),
                    linestyle=METHOD_LINES.get(m, "-"), color=METHOD_COLOURS.get(m, f"C{6 + i}"),
                    label=METHOD_NAMES.get(m, m))  # fmt: skip
        ax.set_yscale("log")
        low, high = ax.get_ylim()
        if high / max(low, 1e-9) < 100:  # less than two decades: label 1, 2, 5 of each decade
            ax.yaxis.set_major_locator(matplotlib.ticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:,.0f}"))
        ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_xlabel("rollouts per prompt (G)" if by_g else "number of rewards (K)")
        ax.set_ylabel("distinct advantage groups")
        ax.set_title(f"{fixed} binary rewards" if by_g else f"{fixed} rollouts per prompt")
        ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    fig.suptitle("Distinct advantage groups over all binary reward combinations")
    fig.tight_layout()
    out = Path(out_png)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out


def load_estimator_dump(path: str | Path):
    """An estimator dump (``algorithm.gdpo_dump_dir``: ``estimator-*.pt``, written by
    ``gdpo_verl.estimator.dump_inputs``) -> DataFrame ``uid`` + one column per reward: the (bs, K) per-response
    scores the estimator normalized (conditions applied, NaN = abstained). Loaded with ``weights_only=True``."""
    import pandas as pd

    try:
        dump = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # torch raises several types for a file that is not a dump
        raise ValueError(f"{path}: not a readable estimator dump ({type(err).__name__}: {err})") from None
    missing = [k for k in ("keys", "uid", "scores") if not isinstance(dump, dict) or k not in dump]
    if missing:
        raise ValueError(f"{path}: not an estimator dump (algorithm.gdpo_dump_dir): no {', '.join(missing)}")
    keys, scores = list(dump["keys"]), torch.as_tensor(dump["scores"], dtype=torch.float64)
    if scores.ndim != 2 or scores.shape != (len(dump["uid"]), len(keys)):
        raise ValueError(f"{path}: scores of shape {tuple(scores.shape)}, expected ({len(dump['uid'])}, {len(keys)})")
    return pd.DataFrame({"uid": list(dump["uid"]), **{k: scores[:, i].numpy() for i, k in enumerate(keys)}})


def load_batch(path: str | Path, *, allow_pickle: bool = False):
    """A saved batch -> pandas DataFrame. ``.parquet``, ``.jsonl``, ``.npz`` (one 1-D array per column) or ``.pt``
    (an estimator dump, :func:`load_estimator_dump`)."""
    import pandas as pd

    path = Path(path)
    suffix = path.suffix.lower()
    check_choice("batch file type", suffix, BATCH_SUFFIXES)
    if suffix == ".pt":
        return load_estimator_dump(path)
    if suffix == ".parquet":
        return pd.read_parquet(path)
    if suffix == ".jsonl":
        return pd.read_json(path, lines=True, dtype=False)
    try:
        with np.load(path, allow_pickle=allow_pickle) as arrays:
            return pd.DataFrame({name: arrays[name] for name in arrays.files})
    except ValueError as err:
        if "allow_pickle" not in str(err):
            raise
        raise ValueError(
            f"{path} holds object arrays (pickled); save uids as strings (np.asarray(uid, dtype=str)) "
            "or pass --allow-pickle for a file you trust"
        ) from err


def batch_report(
    frame,
    reward_columns: Sequence[str] | None = None,
    weights: Sequence[float] | None = None,
    *,
    uid_column: str = "uid",
    epsilon: float = EPSILON,
) -> tuple[list[dict], list[str]]:
    """Distinct counts on one batch: (rows with ``BATCH_COLUMNS``, the reward columns used).

    frame: DataFrame with ``uid_column`` (bs,) and reward columns (bs,) each; by default every numeric column
    other than the uid is a reward. Null/NaN rewards are missing values.
    """
    if uid_column not in frame.columns:
        raise ValueError(f"no uid column {uid_column!r}; columns: {', '.join(map(str, frame.columns))}")
    from pandas.api.types import is_numeric_dtype

    numeric = [str(c) for c in frame.columns if c != uid_column and is_numeric_dtype(frame[c].dtype)]
    if reward_columns is None:
        reward_columns = numeric
    else:
        for c in reward_columns:
            check_choice("reward column", c, numeric)
    if not reward_columns:
        raise ValueError(f"no numeric reward columns; columns: {', '.join(map(str, frame.columns))}")
    scores = torch.tensor(frame[list(reward_columns)].astype(np.float64).to_numpy(), dtype=torch.float64)
    group, num_groups = group_index(frame[uid_column].to_numpy())
    rows = []
    for method in METHODS:
        adv = method_advantages(scores, group, num_groups, method, weights, epsilon=epsilon)
        rows.append(
            {
                "method": method,
                "num_rewards": len(reward_columns),
                "num_groups": num_groups,
                "num_responses": int(scores.shape[0]),
                "distinct_groups": int(unique_group_vectors(adv, group, num_groups).shape[0]),
                "distinct_values": distinct_values(adv, decimals=DECIMALS),
            }
        )
    return rows, list(reward_columns)


def parse_counts(text: str, minimum: int) -> list[int]:
    """``"4"``, ``"2-11"`` or ``"2-4,8"`` -> sorted unique ints, each >= ``minimum`` (ValueError otherwise)."""
    usage = f"expected an integer >= {minimum}, a range like {minimum}-{minimum + 9}, or a list like {minimum},4-6"
    values: set[int] = set()
    for part in text.split(","):
        lo, sep, hi = part.strip().partition("-")
        try:
            a, b = int(lo), int(hi) if sep else int(lo)
        except ValueError:
            raise ValueError(f"{text!r}: {usage}") from None
        if a < minimum or b < a:
            raise ValueError(f"{text!r}: {usage}")
        values.update(range(a, b + 1))
    return sorted(values)


def parse_floats(text: str) -> list[float]:
    """``"1,0.5"`` -> [1.0, 0.5] (ValueError naming the bad item)."""
    try:
        return [float(x) for x in text.split(",")]
    except ValueError:
        raise ValueError(f"{text!r}: expected comma-separated numbers like 1,0.5") from None


def _stderr_progress(line: str) -> None:
    if sys.stderr.isatty():  # one line, rewritten in place
        print(f"\r[distinct] {line}".ljust(80), end="", file=sys.stderr, flush=True)
    else:
        print(f"[distinct] {line}", file=sys.stderr, flush=True)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m gdpo_verl.tools.analysis",
        description="Distinct advantage groups under GRPO, GRPO w/o std and GDPO (paper Figure 3).",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="{distinct,batch}")
    d = sub.add_parser("distinct", help="exhaustive count over all binary reward combinations")
    d.add_argument("--rewards", default="2", help="number of rewards K: 2, a range 1-6, or a list 2,4 (default 2)")
    d.add_argument("--rollouts", default="2-8", help="rollouts per prompt G (>= 2): 4, 2-16, or 2,4,8 (default 2-8)")
    d.add_argument("--methods", default=",".join(METHODS), help=f"comma list from {', '.join(METHODS)} (default all)")
    d.add_argument("--weights", help="reward weights, comma-separated (only with a single K; default all 1)")
    d.add_argument("--format", default="csv", choices=DISTINCT_FORMATS, help="output format (default csv)")
    d.add_argument("--plot", metavar="FILE.png", help="also write a Figure-3-style plot")
    d.add_argument("--max-groups", type=int, default=MAX_GROUPS, help=f"refuse larger cells (default {MAX_GROUPS:,})")
    d.add_argument("--quiet", action="store_true", help="no progress on stderr")
    b = sub.add_parser(
        "batch", help="distinct counts on a saved batch (.parquet, .jsonl, .npz, or an estimator dump .pt)"
    )
    b.add_argument(
        "file", help="batch file with a uid column and one column per reward, or algorithm.gdpo_dump_dir's .pt"
    )
    b.add_argument("--rewards", help="comma list of reward columns (default: every numeric column but the uid)")
    b.add_argument("--weights", help="reward weights, comma-separated, one per reward column (default all 1)")
    b.add_argument("--uid-column", default="uid", help="group id column (default uid)")
    b.add_argument("--format", default="csv", choices=FORMATS, help="output format (default csv)")
    b.add_argument("--allow-pickle", action="store_true", help=".npz with object arrays (trusted files only)")
    d.set_defaults(run=_run_distinct, parser=d)
    b.set_defaults(run=_run_batch, parser=b)
    return parser


def _run_distinct(args, parser: argparse.ArgumentParser) -> None:
    try:
        rewards = parse_counts(args.rewards, 1)
    except ValueError as err:
        parser.error(f"--rewards {err}")
    try:
        rollouts = parse_counts(args.rollouts, 2)
    except ValueError as err:
        parser.error(f"--rollouts {err}")
    methods = [m.strip() for m in args.methods.split(",")]
    for m in methods:
        if m not in METHODS:
            parser.error(f"--methods: unknown method {m!r}; valid values: {', '.join(METHODS)}")
    weights = None
    if args.weights is not None:
        try:
            weights = parse_floats(args.weights)
        except ValueError as err:
            parser.error(f"--weights {err}")
        if len(rewards) != 1 or len(weights) != rewards[0]:
            parser.error(f"--weights needs a single --rewards K and K weights; got K={rewards}, {len(weights)} weights")
    sizes = {(k, g): num_multisets(2**k, g) for k in rewards for g in rollouts}
    too_big = {cell: n for cell, n in sizes.items() if n > args.max_groups}
    if too_big:
        listed = ", ".join(f"K={k} G={g}: {n:,}" for (k, g), n in sorted(too_big.items()))
        parser.error(f"cells over --max-groups {args.max_groups:,} groups ({listed}); shrink the ranges or raise it")
    progress = None if args.quiet or sum(sizes.values()) <= PROGRESS_GROUPS else _stderr_progress
    start = time.perf_counter()
    rows = distinct_table(rewards, rollouts, methods, weights, progress=progress)
    if progress is not None:
        newline = "\n" if sys.stderr.isatty() else ""  # end the line rewritten in place
        elapsed = time.perf_counter() - start
        print(
            f"{newline}[distinct] {len(sizes)} cells, {sum(sizes.values()):,} groups in {elapsed:.1f}s", file=sys.stderr
        )
    if args.format == "markdown-wide":
        sys.stdout.write(distinct_pivot_markdown(rows))
    else:
        sys.stdout.write(format_rows(rows, DISTINCT_COLUMNS, args.format))
    if args.plot:
        print(f"[distinct] plot -> {plot_distinct(rows, args.plot)}", file=sys.stderr)


def _run_batch(args, parser: argparse.ArgumentParser) -> None:
    path = Path(args.file)
    if path.suffix.lower() not in BATCH_SUFFIXES:
        parser.error(f"{path}: unknown file type {path.suffix!r}; valid values: {', '.join(BATCH_SUFFIXES)}")
    if not path.is_file():
        parser.error(f"{path}: no such file")
    try:
        frame = load_batch(path, allow_pickle=args.allow_pickle)
        columns = None if args.rewards is None else [c.strip() for c in args.rewards.split(",")]
        weights = None if args.weights is None else parse_floats(args.weights)
        rows, used = batch_report(frame, columns, weights, uid_column=args.uid_column)
    except ValueError as err:
        parser.error(str(err))
    print(f"[batch] {path}: rewards {', '.join(used)}", file=sys.stderr)
    sys.stdout.write(format_rows(rows, BATCH_COLUMNS, args.format))


def main(argv: Sequence[str] | None = None) -> None:
    parser = build_parser()
    args = parser.parse_args(argv)
    args.run(args, args.parser)


if __name__ == "__main__":
    main()
