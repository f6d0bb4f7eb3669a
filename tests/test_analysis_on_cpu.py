"""Tests of the distinct-advantage-group analysis (gdpo_verl/tools/analysis.py): hand-derived counts, an independent
brute-force oracle, method ordering, the batch report, and the CLI's output formats.

Run: .venv/bin/python -m pytest tests/test_analysis_on_cpu.py
"""

import itertools

import numpy as np
import pandas as pd
import pytest
import torch
from helpers.oracles import verl_grpo_on_sum

from gdpo_verl.core.advantage import gdpo_advantages, group_index
from gdpo_verl.core.contract import RewardSettings
from gdpo_verl.core.gd2po import gd2po_advantages
from gdpo_verl.core.metrics import collapse_metrics, step_metrics
from gdpo_verl.core.rvpo import rvpo_advantages
from gdpo_verl.core.saw import saw_advantages
from gdpo_verl.tools.analysis import (
    METHODS,
    batch_report,
    binary_vectors,
    count_distinct_groups,
    distinct_pivot_markdown,
    distinct_table,
    format_rows,
    iter_multisets,
    main,
    method_advantages,
    num_multisets,
    parse_counts,
    plot_distinct,
    unique_group_vectors,
)


def test_k2_g2_hand_derived():
    # Reward vectors a=00, b=01, c=10, d=11 (sums 0, 1, 1, 2). The C(4+2-1, 2) = 10 multisets:
    #   aa bb cc dd ab ac ad bc bd cd.
    # A G=2 group with two different values (x < y) normalizes to (-1/sqrt2, +1/sqrt2) whatever x and y are
    # (mean (x+y)/2, unbiased std |y-x|/sqrt2); equal values give (0, 0).
    # GRPO (sum, then normalize): sums aa(0,0) bb(1,1) cc(1,1) dd(2,2) bc(1,1) -> (0,0);
    #   ab(0,1) ac(0,1) ad(0,2) bd(1,2) cd(1,2) -> (-.7071, .7071).                         2 distinct.
    # GRPO w/o std (sum minus mean): (0,0); ab ac bd cd differ by 1 -> (-.5, .5); ad differs by 2 -> (-1, 1).
    #                                                                                          3 distinct.
    # GDPO (normalize each reward, then sum): aa bb cc dd -> (0,0); ab, ac, bd, cd: one reward differs ->
    #   (-.7071, .7071); ad: both differ the same way -> (-1.4142, 1.4142); bc: (01,10) the two rewards
    #   cancel -> (0,0).                                                                       3 distinct.
    # GD2PO (sign filter): only bc has per-reward advantages of mixed signs (b: -.7071, +.7071); both rollouts are
    #   masked (0,0) and the prompt weight of the others is 1: GDPO's 3 vectors.                 3 distinct.
    # SAW: over the cell both rewards have the same values, equal weights: GDPO's.               3 distinct.
    # RVPO (k=1, A = -ln mean_j exp(-z_j)): ab -> z (0,-.7071), (0,.7071) -> (-ln((1+e^.7071)/2), -ln((1+e^-.7071)/2))
    #   = (-.4148, .2922), the same for ac, bd, cd; ad -> (-.7071, .7071); bc -> both rows z = (-.7071, .7071) or
    #   (.7071, -.7071): -ln cosh(.7071) = -.2316 each, a group no longer centred; aa.. -> (0,0). 4 distinct.
    assert num_multisets(4, 2) == 10
    assert count_distinct_groups(2, 2) == {"grpo": 2, "grpo_nostd": 3, "gdpo": 3, "gd2po": 3, "saw": 3, "rvpo": 4}
    bc = torch.tensor([[0.0, 1.0], [1.0, 0.0]])
    assert method_advantages(bc, torch.tensor([0, 0]), 1, "rvpo").tolist() == pytest.approx([-0.2316] * 2, abs=1e-4)


def test_k2_g3_hand_derived():
    # Sums come from {0,1,2}; the 10 multisets of 3 sums fall into:
    #   all equal (000 111 222) -> zero vector; (x,x,y) with x<y (001 002 112) -> one pattern (-u,-u,2u)
    #   under GRPO (u = 1/sqrt3), (x,y,y) (011 022 122) -> (-2u,u,u); (0,1,2) -> (-1,0,1).   GRPO: 4 distinct.
    # Without std the scale survives: 001 and 112 give (-1/3,-1/3,2/3) but 002 gives twice that; likewise
    #   011 = 122 != 022: zero + 2 + 2 + (0,1,2) -> 6 distinct.
    # GDPO: per reward column of a G=3 group: constant -> 0; "one 1" (O) -> 1 row gets 2u, others -u;
    #   "two 1s" (T) -> the 0 row gets -2u, others u. Summing the two columns:
    #   Z,Z -> 0;  Z,O -> (-u,-u,2u);  Z,T -> (-2u,u,u);  O,O same row -> (-2u,-2u,4u), O,O different rows ->
    #   (u,u,-2u) = Z,T;  T,T same 0 row -> (-4u,2u,2u), different 0 rows -> (-u,-u,2u) = Z,O;
    #   O,T with the 1 of O on T's 0 row -> 0 (e.g. 10,01,01: sums 1,1,1), else -> (-3u,0,3u).  6 distinct.
    counts = count_distinct_groups(2, 3)
    assert {m: counts[m] for m in ("grpo", "grpo_nostd", "gdpo")} == {"grpo": 4, "grpo_nostd": 6, "gdpo": 6}


@pytest.mark.parametrize("g", [2, 3, 4, 6])
def test_single_reward_counts_are_g(g):
    # K=1: a group is "j ones out of G", j = 0..G (G+1 multisets). j=0 and j=G are constant -> the zero vector;
    # each j in 1..G-1 has its own sorted pattern (j values above the mean) -> G distinct under every method
    # (with one reward GDPO, GRPO and GRPO w/o std see the same ordering of values).
    assert count_distinct_groups(1, g) == dict.fromkeys(METHODS, g)


def oracle_count(k: int, g: int) -> dict[str, int]:
    """Independent count: itertools enumeration, one group at a time through the project's public estimators;
    SAW once over the whole cell (its weights are batch statistics), which checks the symmetry argument that
    ``count_distinct_groups`` relies on."""
    vectors = [tuple(float(b) for b in bits) for bits in itertools.product([0, 1], repeat=k)]
    seen = {m: set() for m in METHODS}
    mask = torch.ones(g, 1)
    combos = list(itertools.combinations_with_replacement(vectors, g))
    for combo in combos:
        scores = torch.tensor(combo, dtype=torch.float64)
        uids = ["p"] * g
        adv = {
            "grpo": verl_grpo_on_sum(scores, uids),
            "grpo_nostd": verl_grpo_on_sum(scores, uids, norm_by_std=False),
            "gdpo": gdpo_advantages(scores, uids, mask, final_norm="none")[:, 0],
            "gd2po": gd2po_advantages(scores, uids, mask, final_norm="none")[:, 0],
            "rvpo": rvpo_advantages(scores, uids, mask, risk=1.0, final_norm="none")[:, 0],
        }
        for m, values in adv.items():
            seen[m].add(tuple(sorted(round(v, 4) + 0.0 for v in values.tolist())))
    cell = torch.tensor([row for combo in combos for row in combo], dtype=torch.float64)
    uids = np.repeat(np.arange(len(combos)), g)
    saw = saw_advantages(cell, uids, torch.ones(len(cell), 1), final_norm="none")[:, 0].view(len(combos), g)
    seen["saw"] = {tuple(sorted(round(v, 4) + 0.0 for v in row)) for row in saw.tolist()}
    return {m: len(s) for m, s in seen.items()}


@pytest.mark.parametrize(("k", "g"), [(2, 4), (2, 5), (3, 3)])
def test_matches_independent_oracle(k, g):
    assert count_distinct_groups(k, g) == oracle_count(k, g)


def test_chunking_does_not_change_counts():
    # K=3, G=4: 330 groups; a chunk of 8 responses (2 groups) forces many chunks and merges.
    assert count_distinct_groups(3, 4, chunk_rows=8) == count_distinct_groups(3, 4)


def test_method_ordering_in_every_cell():
    # GDPO >= GRPO everywhere tested; and GRPO w/o std >= GRPO always (a GRPO vector is the no-std vector
    # divided by the group's std, so equal no-std vectors give equal GRPO vectors).
    rows = distinct_table([1, 2, 3], [2, 3, 4, 5, 6])
    cells = {}
    for r in rows:
        cells.setdefault((r["num_rewards"], r["num_rollouts"]), {})[r["method"]] = r["distinct_groups"]
    assert len(cells) == 15
    for (k, g), c in cells.items():
        assert c["gdpo"] >= c["grpo"], (k, g, c)
        assert c["grpo_nostd"] >= c["grpo"], (k, g, c)
        if k >= 2 and g >= 3:
            assert c["gdpo"] > c["grpo"], (k, g, c)  # strictly finer resolution with >= 2 rewards


@pytest.mark.parametrize(("n", "size", "chunk"), [(4, 2, 1), (4, 2, 3), (5, 3, 7), (16, 2, 100), (3, 5, 1000)])
def test_iter_multisets_is_combinations_with_replacement(n, size, chunk):
    chunks = list(iter_multisets(n, size, chunk))
    got = np.concatenate(chunks)
    expected = np.array(list(itertools.combinations_with_replacement(range(n), size)))
    assert got.shape == (num_multisets(n, size), size)
    np.testing.assert_array_equal(got, expected)
    assert all(c.shape[0] <= max(chunk, 1) for c in chunks)


def test_binary_vectors():
    assert binary_vectors(2).tolist() == [[0, 0], [0, 1], [1, 0], [1, 1]]


def test_method_advantages_match_public_estimators():
    gen = torch.Generator().manual_seed(0)
    scores = torch.randint(0, 3, (24, 3), generator=gen).to(torch.float64)
    scores[3, 1] = torch.nan
    uids = [f"p{i // 4}" for i in range(22)] + ["solo", "p0"]  # a singleton and a group spread out
    group, n = group_index(uids)
    mask = torch.ones(24, 2)
    w = [1.0, 0.5, 2.0]
    torch.testing.assert_close(
        method_advantages(scores, group, n, "gdpo", w).float(),
        gdpo_advantages(scores, uids, mask, w, final_norm="none")[:, 0],
    )
    for method, by_std in [("grpo", True), ("grpo_nostd", False)]:
        torch.testing.assert_close(
            method_advantages(scores, group, n, method, w).float(),
            verl_grpo_on_sum(scores, uids, w, norm_by_std=by_std),
        )
    with pytest.raises(ValueError, match="valid values: grpo, grpo_nostd, gdpo, gd2po, saw, rvpo"):
        method_advantages(scores, group, n, "ppo")


def test_unique_group_vectors_ragged():
    # Groups: {0: [1, -1]}, {1: [-1, 1]} (same multiset), {2: [0]}, {3: [0, 0]} (different size than 2)
    adv = torch.tensor([1.0, -1.0, -1.0, 1.0, 0.0, 0.0, 0.0])
    group = torch.tensor([0, 0, 1, 1, 2, 3, 3])
    assert unique_group_vectors(adv, group, 4).shape[0] == 3
    # -0.0 and 0.0, and values equal after rounding to 1e-4, are one vector.
    same = torch.tensor([[-0.0, 0.70710678], [0.0, 0.70711]])
    assert unique_group_vectors(same).shape[0] == 1


def random_batch(seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(
        {
            "uid": np.repeat([f"p{i}" for i in range(20)], 4),
            "format": rng.integers(0, 2, 80).astype(float),
            "correctness": rng.integers(-3, 4, 80).astype(float),
            "data_source": "toy",
        }
    )
    frame.loc[5, "format"] = np.nan
    return frame


def test_batch_report_matches_training_metrics_and_oracle():
    frame = random_batch().iloc[:78]  # the last group has 2 responses: ragged groups
    rows, used = batch_report(frame)
    assert used == ["format", "correctness"]
    by = {r["method"]: r for r in rows}
    assert [r["method"] for r in rows] == list(METHODS)
    # distinct per-response values: the same count the trainer logs under gdpo/collapse/distinct_*
    logged = step_metrics(
        torch.tensor(frame[used].to_numpy()), frame["uid"].to_numpy(), used, [1.0, 1.0], data_source=None
    )
    assert by["gdpo"]["distinct_values"] == logged["gdpo/collapse/distinct_gdpo"]
    assert by["grpo"]["distinct_values"] == logged["gdpo/collapse/distinct_grpo"]
    settings = RewardSettings(tuple(used), (1.0, 1.0))
    counted = collapse_metrics(settings, torch.tensor(frame[used].to_numpy()), frame["uid"].to_numpy())
    for m in ("gd2po", "saw", "rvpo"):
        assert by[m]["distinct_values"] == counted[f"gdpo/collapse/distinct_{m}"], m
    # distinct group vectors: a per-group Python oracle through the public estimators
    scores = torch.tensor(frame[used].to_numpy())
    mask = torch.ones(len(frame), 1)
    adv = {
        "grpo": verl_grpo_on_sum(scores, frame["uid"].tolist()),
        "grpo_nostd": verl_grpo_on_sum(scores, frame["uid"].tolist(), norm_by_std=False),
        "gdpo": gdpo_advantages(scores, frame["uid"].tolist(), mask, final_norm="none")[:, 0],
        "gd2po": gd2po_advantages(scores, frame["uid"].tolist(), mask, final_norm="none")[:, 0],
        "saw": saw_advantages(scores, frame["uid"].tolist(), mask, final_norm="none")[:, 0],
        "rvpo": rvpo_advantages(scores, frame["uid"].tolist(), mask, risk=1.0, final_norm="none")[:, 0],
    }
    assert set(adv) == set(METHODS)
    for m, values in adv.items():
        groups = {}
        for uid, v in zip(frame["uid"], values.tolist()):
            groups.setdefault(uid, []).append(round(v, 4) + 0.0)
        assert by[m]["distinct_groups"] == len({tuple(sorted(v)) for v in groups.values()}), m
        assert by[m]["num_groups"] == 20 and by[m]["num_responses"] == 78


def test_batch_report_errors():
    frame = random_batch()
    with pytest.raises(ValueError, match="valid values: format, correctness"):
        batch_report(frame, ["length"])
    with pytest.raises(ValueError, match="no uid column 'id'"):
        batch_report(frame, uid_column="id")


def test_parse_counts():
    assert parse_counts("4", 2) == [4]
    assert parse_counts("2-5", 2) == [2, 3, 4, 5]
    assert parse_counts("2,4-5,4", 1) == [2, 4, 5]
    for bad in ["1", "x", "5-3", "2-"]:
        with pytest.raises(ValueError, match="expected an integer >= 2"):
            parse_counts(bad, 2)


def test_cli_csv_exact(capsys):
    main(["distinct", "--rewards", "2", "--rollouts", "2-3"])
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "method,num_rewards,num_rollouts,distinct_groups"
    assert out[1:] == [
        "grpo,2,2,2",
        "grpo,2,3,4",
        "grpo_nostd,2,2,3",
        "grpo_nostd,2,3,6",
        "gdpo,2,2,3",
        "gdpo,2,3,6",
        "gd2po,2,2,3",
        "gd2po,2,3,8",
        "saw,2,2,3",
        "saw,2,3,6",
        "rvpo,2,2,4",
        "rvpo,2,3,9",
    ]


def test_cli_markdown_and_plot(capsys, tmp_path):
    png = tmp_path / "figs" / "distinct.png"
    main(["distinct", "--rewards", "1-2", "--rollouts", "2,4", "--format", "markdown", "--plot", str(png)])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split("|")[1:-1] == [" method     ", " num_rewards ", " num_rollouts ", " distinct_groups "]
    assert set(lines[1]) <= set("|-:") and lines[1].endswith(":|")
    assert len(lines) == 2 + len(METHODS) * 4
    assert all(line.startswith("| ") and line.endswith(" |") for line in lines[2:])
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000


def test_cli_errors_list_valid_values(capsys):
    cases = [
        (["distinct", "--rollouts", "1"], "expected an integer >= 2"),
        (["distinct", "--methods", "grpo,ppo"], "valid values: grpo, grpo_nostd, gdpo, gd2po, saw, rvpo"),
        (["distinct", "--format", "xml"], "choose from"),
        (["distinct", "--rewards", "4", "--rollouts", "16"], "K=4 G=16: 300,540,195"),
        (["distinct", "--rewards", "2-3", "--weights", "1,1"], "needs a single --rewards K"),
        (["batch", "batch.csv"], "valid values: .parquet, .jsonl, .npz, .pt"),
    ]
    for argv, message in cases:
        with pytest.raises(SystemExit):
            main(argv)
        assert message in capsys.readouterr().err


def test_weighted_distinct_count():
    # Unequal weights make GRPO's sum separate 01 from 10, so GRPO gains groups; GDPO keeps its own.
    even = count_distinct_groups(2, 3)
    weighted = count_distinct_groups(2, 3, weights=[1.0, 2.0])
    assert weighted["grpo"] > even["grpo"]
    assert weighted["gdpo"] >= weighted["grpo"]


@pytest.mark.parametrize("suffix", [".parquet", ".jsonl", ".npz"])
def test_cli_batch_files(suffix, tmp_path, capsys):
    frame = random_batch()
    path = tmp_path / f"batch{suffix}"
    if suffix == ".parquet":
        frame.to_parquet(path)
    elif suffix == ".jsonl":
        frame.to_json(path, orient="records", lines=True)
    else:
        np.savez(path, **{c: frame[c].to_numpy().astype(str if c in ("uid", "data_source") else float) for c in frame})
    main(["batch", str(path), "--rewards", "format,correctness", "--format", "csv"])
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert lines[0] == "method,num_rewards,num_groups,num_responses,distinct_groups,distinct_values"
    expected, _ = batch_report(frame, ["format", "correctness"])
    assert lines[1:] == [",".join(str(r[c]) for c in lines[0].split(",")) for r in expected]
    assert "rewards format, correctness" in captured.err


def test_cli_batch_reads_the_estimators_own_dump(tmp_path, capsys):
    # written by the function the estimator calls under algorithm.gdpo_dump_dir, read back by `batch`
    from gdpo_verl.estimator import dump_inputs

    frame = random_batch()
    scores = torch.tensor(frame[["format", "correctness"]].to_numpy(), dtype=torch.float32)
    mask = torch.ones(len(frame), 3)
    path = dump_inputs(str(tmp_path), ["format", "correctness"], None, frame["uid"].to_numpy(), mask, scores, mask)
    main(["batch", path, "--format", "csv"])
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    expected, _ = batch_report(frame, ["format", "correctness"])
    assert lines[1:] == [",".join(str(r[c]) for c in lines[0].split(",")) for r in expected]
    assert "rewards format, correctness" in captured.err
    torch.save({"keys": ["a"], "uid": ["x"]}, tmp_path / "other.pt")
    with pytest.raises(SystemExit):
        main(["batch", str(tmp_path / "other.pt")])
    assert "not an estimator dump (algorithm.gdpo_dump_dir): no scores" in capsys.readouterr().err


def test_npz_object_arrays_need_allow_pickle(tmp_path, capsys):
    path = tmp_path / "batch.npz"
    np.savez(path, uid=np.array(["a", "a", "b", "b"], dtype=object), score=np.array([0.0, 1.0, 1.0, 1.0]))
    with pytest.raises(SystemExit):
        main(["batch", str(path)])
    assert "--allow-pickle" in capsys.readouterr().err
    main(["batch", str(path), "--allow-pickle"])
    assert capsys.readouterr().out.splitlines()[1] == "grpo,1,2,4,2,3"


def test_format_helpers_and_plot_vs_k(tmp_path):
    rows = distinct_table([1, 2, 3], [4])
    assert format_rows(rows[:1], ["method", "distinct_groups"], "csv") == "method,distinct_groups\ngrpo,4\n"
    wide = distinct_pivot_markdown(rows).splitlines()
    assert wide[0].split("|")[1:-1] == [" K ", " G ", *(f" {m} " for m in METHODS)]
    assert len(wide) == 2 + 3
    out = plot_distinct(rows, tmp_path / "by_k.png")  # a single G: x axis is K
    assert out.stat().st_size > 5000


def test_cli_markdown_wide(capsys):
    main(["distinct", "--rewards", "2", "--rollouts", "2", "--format", "markdown-wide"])
    assert capsys.readouterr().out.splitlines() == [
        "| K | G | grpo | grpo_nostd | gdpo | gd2po | saw | rvpo |",
        "|--:|--:|-----:|-----------:|-----:|------:|----:|-----:|",
        "| 2 | 2 |    2 |          3 |    3 |     3 |   3 |    4 |",
    ]
