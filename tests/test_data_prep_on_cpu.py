"""Data prep (data_prep/*) on small fixture files written here: schema, bad rows, atomic and idempotent output.

Each script's output is read back with verl's own ``RLHFDataset`` (the reader verl's trainer uses), so the
files are checked against what verl expects, not only against our schema. Run:
python -m pytest tests/test_data_prep_on_cpu.py
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # data_prep is a top-level folder of the repository, not an installed package
    sys.path.insert(0, str(ROOT))

from data_prep import common, deepscaler, eurus_code, gsm8k, toolcall  # noqa: E402
from gdpo_verl.rewards.gsm8k import SYSTEM_PROMPT  # noqa: E402


def write_json(path: Path, records) -> Path:
    path.write_text(json.dumps(records))
    return path


def write_jsonl(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n")
    return path


def write_parquet(path: Path, records: list[dict]) -> Path:
    pq.write_table(pa.Table.from_pylist(records), path)
    return path


def rows(path: Path) -> list[dict]:
    return pq.read_table(path).to_pylist()


def tool_record(i: int) -> dict:
    call = {"name": f"tool_{i}", "parameters": {"x": i}}
    output = f"<think>use tool {i}</think>\n<tool_call>\n{json.dumps(call)}\n</tool_call>"
    return {"instruction": f"You have tool_{i}.", "input": f"<user> question {i} </user>", "output": output}


BAD_TOOL_RECORDS = [
    {"instruction": "x", "input": "y"},  # no output
    {"instruction": "x", "input": "", "output": "<think>a</think>"},  # empty input
    {"instruction": "x", "input": "y", "output": "<think>a</think>\n<tool_call>\n{not json}\n</tool_call>"},
    "just a string",
]


# ------------------------------------------------------------------------------------------------- toolcall


def test_toolcall_split_matches_the_reference_shuffle(tmp_path):
    records = [tool_record(i) for i in range(100)]
    toolcall.main([str(write_json(tmp_path / "rlla.json", records)), "--out", str(tmp_path / "out")])
    # The reference: np.random.seed(31415); np.random.shuffle(dataset); test = the last int(n * 0.02).
    np.random.seed(31415)
    reference = list(records)
    np.random.shuffle(reference)
    train, test = rows(tmp_path / "out" / "train.parquet"), rows(tmp_path / "out" / "test.parquet")
    assert len(test) == 2 and len(train) == 98  # int(100 * 0.02) = 2
    assert [r["reward_model"]["ground_truth"] for r in train + test] == [r["output"] for r in reference]
    first = train[0]
    assert first["prompt"] == [
        {"role": "system", "content": reference[0]["instruction"]},
        {"role": "user", "content": reference[0]["input"]},
    ]
    assert first["data_source"] == "rlla" and first["reward_model"]["style"] == "rule"
    assert first["extra_info"] == {"split": "train", "index": 0}
    assert test[1]["extra_info"] == {"split": "test", "index": 1}


def test_toolcall_bad_rows_fail_without_skip_bad(tmp_path, capsys):
    raw = write_json(tmp_path / "rlla.json", [tool_record(i) for i in range(10)] + BAD_TOOL_RECORDS)
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as exit_info:
        toolcall.main([str(raw), "--out", str(out)])
    assert exit_info.value.code == 2
    assert not out.exists()  # nothing written
    report = capsys.readouterr().out
    assert "14 records read, 4 malformed" in report
    assert "field 'output' is missing" in report and "malformed <tool_call> block" in report
    assert "record is a str" in report and "field 'input' is empty" in report


def test_toolcall_skip_bad_drops_them_and_is_idempotent(tmp_path):
    raw = write_json(tmp_path / "rlla.json", [tool_record(i) for i in range(10)] + BAD_TOOL_RECORDS)
    out = tmp_path / "out"
    toolcall.main([str(raw), "--out", str(out), "--skip-bad"])
    first = {p.name: p.read_bytes() for p in out.iterdir()}
    assert sorted(first) == ["test.parquet", "train.parquet"]  # no temporary files left behind
    assert len(rows(out / "train.parquet")) + len(rows(out / "test.parquet")) == 10
    toolcall.main([str(raw), "--out", str(out), "--skip-bad"])
    assert {p.name: p.read_bytes() for p in out.iterdir()} == first  # byte-identical on a re-run


def test_write_is_atomic(tmp_path, monkeypatch):
    # A failure while writing leaves the previous file untouched and no temporary file behind.
    target = tmp_path / "train.parquet"
    target.write_bytes(b"previous")

    def broken(table, where, **kwargs):
        Path(where).write_bytes(b"partial")
        raise OSError("disk full")

    monkeypatch.setattr(common.pq, "write_table", broken)
    with pytest.raises(OSError, match="disk full"):
        common.write_parquet([], target)
    assert target.read_bytes() == b"previous" and [p.name for p in tmp_path.iterdir()] == ["train.parquet"]


def test_cli_exit_status(tmp_path):
    raw = write_json(tmp_path / "rlla.json", [*map(tool_record, range(1, 5)), {"instruction": "x"}])
    argv = [sys.executable, "-m", "data_prep.toolcall", str(raw), "--out", str(tmp_path / "out")]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "--skip-bad" in done.stderr
    done = subprocess.run([*argv, "--skip-bad"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and (tmp_path / "out" / "train.parquet").exists()


# ---------------------------------------------------------------------------------------------------- gsm8k


def test_gsm8k_from_local_files(tmp_path):
    good = {"question": "What is 3 + 4?", "answer": "3 + 4 = <<3+4=7>>7\n#### 7"}
    train = write_jsonl(
        tmp_path / "train.jsonl",
        [
            json.dumps(good),
            json.dumps({"question": "q", "answer": "no final line"}),  # no ####
            "{this line is not json",
            json.dumps({"question": "q2", "answer": "x\n#### 1,200"}),
        ],
    )
    test = write_parquet(tmp_path / "test.parquet", [{"question": "Q?", "answer": "so\n#### -3"}])
    argv = ["--train-file", str(train), "--test-file", str(test), "--out", str(tmp_path / "out")]
    with pytest.raises(SystemExit):
        gsm8k.main(argv)
    gsm8k.main([*argv, "--skip-bad"])
    train_rows = rows(tmp_path / "out" / "train.parquet")
    assert [r["reward_model"]["ground_truth"] for r in train_rows] == ["7", "1,200"]  # verbatim after ####
    assert train_rows[0]["prompt"] == [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": "What is 3 + 4?"},
    ]
    assert train_rows[0]["data_source"] == "openai/gsm8k"
    assert rows(tmp_path / "out" / "test.parquet")[0]["reward_model"]["ground_truth"] == "-3"


# ----------------------------------------------------------------------------------------------- deepscaler


def test_deepscaler_from_local_files(tmp_path):
    train = write_parquet(
        tmp_path / "dsr.parquet",
        [
            {"problem": "Compute $1+1$.", "answer": "2", "solution": "..."},
            {"problem": "  ", "answer": "3", "solution": "..."},  # empty problem
        ],
    )
    test = write_json(tmp_path / "aime.json", [{"problem": "AIME problem", "answer": 204}])  # numeric answer
    argv = ["--train-file", str(train), "--test-file", str(test), "--out", str(tmp_path / "out"), "--skip-bad"]
    deepscaler.main(argv)
    (row,) = rows(tmp_path / "out" / "train.parquet")
    assert row["prompt"] == [{"role": "user", "content": f"Compute $1+1$. {deepscaler.INSTRUCTION}"}]
    assert row["data_source"] == "deepscaler" and row["reward_model"]["ground_truth"] == "2"
    (aime,) = rows(tmp_path / "out" / "test.parquet")
    assert aime["data_source"] == "aime2024" and aime["reward_model"]["ground_truth"] == "204"


# ----------------------------------------------------------------------------------------------- eurus code


def eurus_row(ability: str, ground_truth: str, source: str = "taco") -> dict:
    prompt = [{"role": "system", "content": "Write Python."}, {"role": "user", "content": "Add two numbers."}]
    return {
        "data_source": source,
        "prompt": prompt,
        "ability": ability,
        "reward_model": {"style": "rule", "ground_truth": ground_truth},
        "extra_info": {"split": "train", "index": 0},
    }


def test_eurus_code_keeps_valid_code_rows(tmp_path, capsys):
    tests = json.dumps({"inputs": ["1 2\n"], "outputs": ["3\n"]})
    train = write_parquet(
        tmp_path / "train.parquet",
        [
            eurus_row("code", tests),
            eurus_row("math", "42", source="numina_olympiads"),  # skipped, not malformed
            eurus_row("code", "{not json"),
            eurus_row("code", json.dumps({"inputs": ["1"], "outputs": []})),  # lengths differ
            eurus_row("code", json.dumps({"fn_name": "f", "inputs": ["1\nnot json"], "outputs": ["1"]})),
            eurus_row("code", json.dumps({"fn_name": "f", "inputs": ["1"], "outputs": ["[" * 100000]})),
        ],
    )
    test = write_parquet(tmp_path / "validation.parquet", [eurus_row("code", tests, source="apps")])
    argv = ["--train-file", str(train), "--test-file", str(test), "--out", str(tmp_path / "out"), "--skip-bad"]
    eurus_code.main(argv)
    printed = capsys.readouterr().out
    assert "1 non-code records skipped" in printed and "7 records read, 4 malformed" in printed
    assert f"call-based test 0 is not JSON (JSONDecodeError)  (e.g. {train} record 4)" in printed
    assert f"call-based test 0 is not JSON (RecursionError)  (e.g. {train} record 5)" in printed
    (row,) = rows(tmp_path / "out" / "train.parquet")
    assert row["ability"] == "code" and row["reward_model"]["ground_truth"] == tests
    assert row["prompt"][0] == {"role": "system", "content": "Write Python."}
    assert rows(tmp_path / "out" / "test.parquet")[0]["data_source"] == "apps"


# ---------------------------------------------------------------------------------------- verl's own reader


def test_every_output_loads_with_verls_dataset(tmp_path):
    """All four scripts' files through verl's RLHFDataset and collate_fn, as the trainer reads them."""
    from omegaconf import OmegaConf
    from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn

    out = tmp_path / "out"
    toolcall.main([str(write_json(tmp_path / "r.json", [tool_record(i) for i in range(5)])), "--out", str(out / "t")])
    qa = write_jsonl(tmp_path / "g.jsonl", [json.dumps({"question": "1+1?", "answer": "#### 2"})])
    gsm8k.main(["--train-file", str(qa), "--test-file", str(qa), "--out", str(out / "g")])
    dsr = write_json(tmp_path / "d.json", [{"problem": "1+1?", "answer": "2"}])
    deepscaler.main(["--train-file", str(dsr), "--test-file", str(dsr), "--out", str(out / "d")])
    code = write_parquet(tmp_path / "c.parquet", [eurus_row("code", json.dumps({"inputs": ["1"], "outputs": ["1"]}))])
    eurus_code.main(["--train-file", str(code), "--test-file", str(code), "--out", str(out / "c")])
    config = OmegaConf.create({"filter_overlong_prompts": False, "cache_dir": str(tmp_path / "cache")})
    for path in sorted(out.glob("*/*.parquet")):
        assert pq.read_schema(path).remove_metadata() == common.SCHEMA, path
        dataset = RLHFDataset(str(path), tokenizer=None, config=config)
        item = dataset[0]
        assert item["raw_prompt"] and all(set(m) == {"role", "content"} for m in item["raw_prompt"])
        assert isinstance(item["reward_model"]["ground_truth"], str) and item["data_source"]
        batch = collate_fn([dataset[i] for i in range(len(dataset))])
        assert len(batch["data_source"]) == len(dataset)


# --- hostile inputs: one line naming the file and records, never a traceback, never a silent download ----------
def run_prep(module, *args, cwd=ROOT):
    env = {**os.environ, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-m", f"data_prep.{module}", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=120, env=env)  # fmt: skip


def gsm8k_jsonl(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_empty_input_is_an_error_and_writes_nothing(tmp_path):
    train, test = gsm8k_jsonl(tmp_path / "train.jsonl", []), gsm8k_jsonl(tmp_path / "test.jsonl", [])
    done = run_prep("gsm8k", "--train-file", train, "--test-file", test, "--out", tmp_path / "out")
    assert done.returncode == 2 and "no usable records in split train, test" in done.stderr
    assert not (tmp_path / "out").exists() and "Traceback" not in done.stderr


def test_truncated_parquet_and_non_utf8_json_are_one_line_errors(tmp_path):
    good = gsm8k_jsonl(tmp_path / "ok.jsonl", [{"question": "q", "answer": "x #### 1"}])
    parquet = tmp_path / "train.parquet"
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"question": ["q"] * 100, "answer": ["#### 1"] * 100}), parquet)
    parquet.write_bytes(parquet.read_bytes()[:-40])  # truncated
    latin = tmp_path / "latin.jsonl"
    latin.write_bytes('{"question": "caf\xe9", "answer": "#### 1"}\n'.encode("latin-1"))
    for bad in (parquet, latin):
        done = run_prep("gsm8k", "--train-file", bad, "--test-file", good, "--out", tmp_path / "out")
        assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
        assert f"{bad}: cannot read:" in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_one_local_file_without_the_other_never_downloads(tmp_path):
    good = gsm8k_jsonl(tmp_path / "ok.jsonl", [{"question": "q", "answer": "x #### 1"}])
    start = time.monotonic()
    done = run_prep("gsm8k", "--train-file", good, "--out", tmp_path / "out")
    assert done.returncode != 0 and "--train-file given without --test-file" in done.stderr
    assert time.monotonic() - start < 30 and "Traceback" not in done.stderr


@pytest.mark.slow
def test_offline_download_is_a_one_line_message(tmp_path):
    done = run_prep("gsm8k", "--out", tmp_path / "out")
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert done.stderr.strip().startswith("cannot download openai/gsm8k/main (train)") and "local files" in done.stderr


def test_bad_records_are_named_by_file_and_index(tmp_path):
    records = [{"question": "q", "answer": "x #### 1"}, {"question": "q"}, {"question": "q", "answer": "no hashes"},
               {"question": "q"}]  # fmt: skip
    train = gsm8k_jsonl(tmp_path / "train.jsonl", records)
    test = gsm8k_jsonl(tmp_path / "test.jsonl", records[:1])
    done = run_prep("gsm8k", "--train-file", train, "--test-file", test, "--out", tmp_path / "out")
    assert done.returncode == 2
    assert f"field 'answer' is missing, not a string  (e.g. {train} record 1, {train} record 3)" in done.stdout
    assert f"answer has no '####' line  (e.g. {train} record 2)" in done.stdout


@pytest.mark.parametrize("answer", ["NaN", "Infinity", "true", "-inf", float("nan"), float("inf"), True])
def test_math_answers_must_be_finite(answer):
    from data_prep.common import BadRecord
    from data_prep.deepscaler import answer_text

    with pytest.raises(BadRecord, match="answer"):
        answer_text({"problem": "p", "answer": answer})
    assert answer_text({"answer": 7}) == "7" and answer_text({"answer": "\\frac{1}{2}"}) == "\\frac{1}{2}"


# --- streaming: deep nesting, symlink loops, memory bounded by the record, not the file --------------------------
def test_deep_nesting_is_refused_with_one_line_naming_the_record(tmp_path):
    good = gsm8k_jsonl(tmp_path / "ok.jsonl", [{"question": "q", "answer": "x #### 1"}])
    deep = "[" * 100_000 + "]" * 100_000
    jsonl = tmp_path / "deep.jsonl"
    jsonl.write_text(json.dumps({"question": "q", "answer": "x #### 1"}) + "\n" + deep + "\n")
    done = run_prep("gsm8k", "--train-file", jsonl, "--test-file", good, "--out", tmp_path / "out")
    assert done.returncode == 2 and "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert f"line 2 is nested too deeply to read (RecursionError)  (e.g. {jsonl} record 1)" in done.stdout
    as_list = tmp_path / "deep.json"
    as_list.write_text('[{"question": "q", "answer": "x #### 1"}, ' + deep + "]")
    done = run_prep("gsm8k", "--train-file", as_list, "--test-file", good, "--out", tmp_path / "out")
    assert done.returncode == 2 and done.stderr.strip() == (
        f"{as_list}: cannot read: ReadError: record 1 is nested too deeply to read (RecursionError)"
    )
    assert not (tmp_path / "out").exists()
    # the same records without the deep one: written
    as_list.write_text('[{"question": "q", "answer": "x #### 1"} ,\n {"question": "r", "answer": "#### 22"} ]')
    done = run_prep("gsm8k", "--train-file", as_list, "--test-file", good, "--out", tmp_path / "out")
    assert done.returncode == 0, done.stderr
    assert [r["reward_model"]["ground_truth"] for r in rows(tmp_path / "out" / "train.parquet")] == ["1", "22"]


def test_a_symlink_loop_exits_2_with_one_line(tmp_path):
    loop = tmp_path / "loop.jsonl"
    loop.symlink_to(loop)
    good = gsm8k_jsonl(tmp_path / "ok.jsonl", [{"question": "q", "answer": "x #### 1"}])
    done = run_prep("gsm8k", "--train-file", loop, "--test-file", good, "--out", tmp_path / "out")
    assert done.returncode == 2 and done.stderr.strip().startswith(f"{loop}: cannot read: OSError")
    assert len(done.stderr.strip().splitlines()) == 1
    done = run_prep("toolcall", loop, "--out", tmp_path / "out")
    assert done.returncode == 2 and done.stderr.strip().startswith(f"{loop}: cannot read: OSError")


@pytest.mark.parametrize("suffix", [".json", ".jsonl"])
def test_json_records_stream_in_chunks_whatever_their_sizes(tmp_path, monkeypatch, suffix):
    monkeypatch.setattr(common, "CHUNK", 7)  # records straddle chunk boundaries, numbers too
    records = [{"question": "q" * n, "answer": f"#### {n}"} for n in (0, 1, 5, 40, 3)] + [123456789, [1, 2.5e3]]
    path = tmp_path / f"r{suffix}"
    if suffix == ".json":
        path.write_text(json.dumps(records, indent=1))
    else:
        gsm8k_jsonl(path, records)
    assert list(common.read_records(path)) == records


def peak_rss_mb(*args) -> float:
    """Peak resident memory (MB) of ``python -m data_prep.gsm8k ARGS`` in a fresh child process."""
    code = (
        "import re, runpy, sys; sys.argv = ['gsm8k', *sys.argv[1:]]\n"
        "try:\n    runpy.run_module('data_prep.gsm8k', run_name='__main__')\n"
        "except SystemExit:\n    pass\n"
        # VmHWM: this process image's own peak (getrusage's ru_maxrss keeps the parent's peak across exec)
        "print(int(re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1)) / 1024)"
    )
    done = subprocess.run([sys.executable, "-c", code, *map(str, args)], cwd=ROOT, capture_output=True, text=True)
    return float(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_memory_is_bounded_by_the_largest_record_not_the_file(tmp_path):
    """200 MB of 1 MB records and one 60 MB line (refused at --max-record-mb 8): the run holds a few records."""
    small = gsm8k_jsonl(tmp_path / "small.jsonl", [{"question": "q", "answer": "x #### 1"}])
    out = tmp_path / "out"
    baseline = peak_rss_mb("--train-file", small, "--test-file", small, "--out", out, "--skip-bad")
    big = tmp_path / "big.jsonl"
    with open(big, "w") as f:
        record = json.dumps({"question": "q" * (1 << 20), "answer": "x #### 1"}) + "\n"
        for i in range(200):
            f.write(record)
            if i == 100:
                f.write(json.dumps({"question": "q" * (60 << 20), "answer": "#### 1"}) + "\n")
    as_list = tmp_path / "big.json"
    with open(as_list, "w") as f:
        f.write("[" + record.strip())
        for _ in range(199):
            f.write("," + record.strip())
        f.write("]")
    for path in (big, as_list):
        peak = peak_rss_mb("--train-file", path, "--test-file", small, "--out", out, "--skip-bad", "--max-record-mb", 8)
        # 2 x the largest record read (8 MB) + a write batch as rows, arrow table and compressed page (3 x 8 MB)
        assert peak - baseline < 2 * 8 + 3 * common.WRITE_BATCH_BYTES / 2**20, (path, peak, baseline)
        assert len(rows(out / "train.parquet")) == 200
