"""Data preparation, the Level3-500 selection and the evaluation report, on small fixture files in the
column layouts of the real datasets (no hub access, no GPU)."""

import json
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from avspo_plugin.math_reward.answer import EVALUATION_SOURCES, gold_from_gsm8k
from avspo_plugin.math_reward.reward import compute_score, score_many
from recipes.math_data import evaluate, level3, prepare, sources
from recipes.math_data.generation import Engine, Sampling

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).parent / "fixtures"
LOCAL = {
    "math500": "math500_test.jsonl",
    "gsm8k": "gsm8k_test.jsonl",
    "minerva": "minerva_test.jsonl",
    "olympiadbench": "olympiadbench_test.jsonl",
    "amc": "amc_test.jsonl",
    "aime2024": "aime2024_test.csv",
}
# Reference answers the fixtures must yield, per benchmark, in row order.
REFERENCES = {
    "math500": ["\\left( 3, \\frac{\\pi}{2} \\right)", "3", "5"],
    "gsm8k": ["26", "800", "5000"],
    "minerva": ["100", "1.0"],
    # several parts, as OlympiadBench writes them: ["$3$, $-2$"] and ["$1$", "$-1$"]
    "olympiadbench": ["4", "\\frac{\\pi}{4}", "3, -2", "1, -1"],
    "amc": ["23", "9"],
    "aime2024": ["130", "841"],
}


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    """The fixtures through `prepare math` and `prepare eval`, as a user runs them."""
    out = tmp_path_factory.mktemp("data")
    local = [f"--local={name}={FIXTURES / file}" for name, file in LOCAL.items()]
    assert prepare.main(["math", "--local", str(FIXTURES / "math_train.jsonl"), "--out", str(out / "math_train.parquet")]) == 0
    assert prepare.main(["eval", "--out-dir", str(out / "eval"), *local]) == 0
    return out


def test_eval_sets_in_verl_format(prepared):
    for name, references in REFERENCES.items():
        rows = sources.read_verl_parquet(prepared / "eval" / f"{name}.parquet")
        assert [row["reward_model"]["ground_truth"] for row in rows] == references
        for index, row in enumerate(rows):
            assert row["data_source"] == name
            assert row["ability"] == "math"
            assert row["reward_model"]["style"] == "rule"
            assert row["extra_info"]["index"] == index
            system, user = row["prompt"]
            assert system == {"role": "system", "content": sources.SYSTEM_PROMPT}
            assert user["role"] == "user" and user["content"].strip()
    olympiad = sources.read_verl_parquet(prepared / "eval" / "olympiadbench.parquet")
    assert olympiad[1]["prompt"][1]["content"].startswith("A circle is inscribed in a square")


def test_several_part_references_score_as_a_grader_would(prepared):
    rows = sources.read_verl_parquet(prepared / "eval" / "olympiadbench.parquet")
    roots, units = rows[2]["reward_model"]["ground_truth"], rows[3]["reward_model"]["ground_truth"]
    for response in ("\\boxed{3, -2}", "\\boxed{-2, 3}", "$x = \\boxed{3}$ or $x = \\boxed{-2}$", "The answer is $3$ and $-2$."):
        assert compute_score("olympiadbench", response, roots)["score"] == 1.0, response
    for response in ("\\boxed{3}", "\\boxed{3, 2}", "\\boxed{3, -2, 1}"):
        assert compute_score("olympiadbench", response, roots)["score"] == 0.0, response
    assert compute_score("olympiadbench", "\\boxed{\\pm 1}", units)["score"] == 1.0


def test_math_train_keeps_levels_and_subjects(prepared):
    rows = sources.read_verl_parquet(prepared / "math_train.parquet")
    assert [row["extra_info"]["level"] for row in rows] == [1, 2, 3, 3, 3, 3, 3, 3, 4, None]
    assert rows[2]["reward_model"]["ground_truth"] == "(2,3)"
    assert rows[7]["reward_model"]["ground_truth"] == "\\dfrac{1}{6}"
    assert rows[7]["extra_info"]["type"] == "Counting & Probability"


def test_all_files_share_one_schema_for_verl(prepared, tmp_path):
    # verl concatenates train/val files with `datasets`, which needs identical features.
    import datasets

    files = sorted((prepared / "eval").glob("*.parquet")) + [prepared / "math_train.parquet"]
    schemas = {str(pq.read_schema(file).remove_metadata()) for file in files}
    assert len(schemas) == 1
    parts = [datasets.load_dataset("parquet", data_files=str(f), cache_dir=str(tmp_path))["train"] for f in files]
    assert len(datasets.concatenate_datasets(parts)) == 10 + sum(len(r) for r in REFERENCES.values())


def test_level_filter_and_local_parquet_input(prepared, tmp_path):
    # A hub snapshot is a folder of parquet shards: read it as a folder.
    shard_dir = tmp_path / "snapshot" / "data"
    shard_dir.mkdir(parents=True)
    raw = sources.read_local(FIXTURES / "math_train.jsonl")
    import pyarrow as pa

    pq.write_table(pa.Table.from_pylist(raw[:5]), shard_dir / "train-00000-of-00002.parquet")
    pq.write_table(pa.Table.from_pylist(raw[5:]), shard_dir / "train-00001-of-00002.parquet")
    out = tmp_path / "level3.parquet"
    assert prepare.main(["math", "--local", str(tmp_path / "snapshot"), "--levels", "3", "--out", str(out)]) == 0
    rows = sources.read_verl_parquet(out)
    assert [row["extra_info"]["index"] for row in rows] == [2, 3, 4, 5, 6, 7]


def test_bad_inputs_are_named(tmp_path, capsys):
    bad = tmp_path / "gsm8k.jsonl"
    bad.write_text(json.dumps({"question": "q?", "answer": "no final line"}) + "\n")
    assert prepare.main(["eval", "--out-dir", str(tmp_path), "--benchmarks", "gsm8k", f"--local=gsm8k={bad}"]) == 2
    assert "gsm8k row 0" in capsys.readouterr().err
    renamed = tmp_path / "amc.jsonl"
    renamed.write_text(json.dumps({"statement": "x", "answer": 1}) + "\n")
    assert prepare.main(["eval", "--out-dir", str(tmp_path), "--benchmarks", "amc", f"--local=amc={renamed}"]) == 2
    assert "no question column" in capsys.readouterr().err
    missing = tmp_path / "nowhere.jsonl"
    assert prepare.main(["math", "--local", str(missing), "--out", str(tmp_path / "o.parquet")]) == 2
    assert "nowhere.jsonl" in capsys.readouterr().err
    assert prepare.main(["eval", "--out-dir", str(tmp_path), "--local=math=x.jsonl"]) == 2
    assert "python -m recipes.math_data.prepare: error: --local 'math=x.jsonl'" in capsys.readouterr().err
    with pytest.raises(ValueError, match="####"):
        gold_from_gsm8k("The answer is 5")


# ---------------------------------------------------------------- Level3-500 selection


def _rows(prepared):
    return [r for r in sources.read_verl_parquet(prepared / "math_train.parquet") if r["extra_info"]["level"] == 3]


def test_selection_keeps_the_pass_rate_range_inclusive(prepared):
    rates = level3.read_pass_rates(FIXTURES / "math_level3_pass_rates.jsonl")
    # Fixture pass rates: index 2: 3/10 = 0.3, 3: 5/16, 4: 7/16, 5: 8/16 = 0.5, 6: 9/16, 7: 2/16.
    chosen = level3.select(_rows(prepared), rates, low=0.3, high=0.5, size=4, seed=0)
    assert [row["extra_info"]["index"] for row in chosen.rows] == [2, 3, 4, 5]
    assert chosen.summary() == {
        "selected": 4, "candidates": 6, "in_range": 4, "pass_rate_range": [0.3, 0.5], "seed": 0,
    }


def _samples():
    """Recorded selector samples per problem index (tests/recipes/fixtures/math_level3_samples.jsonl)."""
    records = [json.loads(line) for line in (FIXTURES / "math_level3_samples.jsonl").read_text().splitlines()]
    return {record["index"]: [text for text, count in record["responses"] for _ in range(count)] for record in records}


def test_pass_rate_table_is_what_the_training_reward_gives_on_the_samples(prepared, monkeypatch):
    """The selection re-run on recorded samples with the reward as it is now: the fixture table (and so
    the selection tests above) is what the training reward gives. The samples hold answers with units,
    equivalent forms and truncated working; the paper's last-number fallback would count the truncated
    ones and move problems across the [0.3, 0.5] range."""
    rows, samples = _rows(prepared), _samples()
    monkeypatch.setattr(
        level3, "generate_chat", lambda engine, prompts, sampling: [samples[r["extra_info"]["index"]] for r in rows]
    )
    rates = level3.measure_pass_rates(rows, Engine("recorded"), Sampling(16, 1.0, 1024), score_workers=1)
    assert rates == level3.read_pass_rates(FIXTURES / "math_level3_pass_rates.jsonl")
    chosen = level3.select(rows, rates, low=0.3, high=0.5, size=4, seed=0)
    assert [row["extra_info"]["index"] for row in chosen.rows] == [2, 3, 4, 5]

    def evaluation_rate(row):
        texts = samples[row["extra_info"]["index"]]
        scores = score_many([(t, row["reward_model"]["ground_truth"]) for t in texts], answer_sources=EVALUATION_SOURCES, workers=1)
        return sum(score.acc for score in scores) / len(texts)

    by_paper_rule = {row["extra_info"]["index"]: evaluation_rate(row) for row in rows}
    assert sorted(index for index, rate in by_paper_rule.items() if 0.3 <= rate <= 0.5) == [2, 4]


def test_selection_draw_is_fixed_by_the_seed(prepared):
    rows = _rows(prepared)
    rates = level3.read_pass_rates(FIXTURES / "math_level3_pass_rates.jsonl")
    draws = {
        seed: tuple(r["extra_info"]["index"] for r in level3.select(rows, rates, size=2, seed=seed).rows)
        for seed in range(8)
    }
    assert all(set(draw) <= {2, 3, 4, 5} and len(draw) == 2 for draw in draws.values())
    assert len(set(draws.values())) > 1  # the seed matters
    again = level3.select(list(reversed(rows)), list(reversed(rates)), size=2, seed=3).rows
    assert tuple(r["extra_info"]["index"] for r in again) == draws[3]  # row order does not


def test_selection_errors(prepared):
    rows = _rows(prepared)
    rates = level3.read_pass_rates(FIXTURES / "math_level3_pass_rates.jsonl")
    with pytest.raises(ValueError, match="only 4 of 6 problems"):
        level3.select(rows, rates, size=5)
    assert len(level3.select(rows, rates, size=5, allow_fewer=True).rows) == 4
    with pytest.raises(ValueError, match="1 row\\(s\\) without a pass rate"):
        level3.select(rows, rates[1:], size=1)
    with pytest.raises(ValueError, match="twice"):
        level3.select(rows, rates + rates[:1], size=1)
    with pytest.raises(ValueError, match="low <= high"):
        level3.select(rows, rates, low=0.6, high=0.5)


def test_level3_cli_from_a_pass_rate_table(prepared, tmp_path, capsys):
    out = tmp_path / "level3_500.parquet"
    args = ["level3-500", "--train", str(prepared / "math_train.parquet"), "--out", str(out)]
    table = ["--pass-rates", str(FIXTURES / "math_level3_pass_rates.jsonl")]
    assert prepare.main([*args, *table, "--size", "3", "--seed", "1"]) == 0
    summary = json.loads(out.with_suffix(".summary.json").read_text())
    assert summary["selected"] == 3 and summary["levels"] == [3] and summary["seed"] == 1
    assert len(sources.read_verl_parquet(out)) == 3
    assert prepare.main([*args, *table]) == 2  # 500 asked, 4 in range
    assert "fewer than size=500" in capsys.readouterr().err
    assert prepare.main(args) == 2
    assert "python -m recipes.math_data.prepare: error: level3-500 needs --model (sample on GPUs) or --pass-rates" in capsys.readouterr().err


def test_pass_rate_table_round_trip_and_validation(tmp_path):
    rates = [level3.PassRate(4, 16, 6), level3.PassRate(9, 8, 0)]
    path = level3.write_pass_rates(rates, tmp_path / "rates.jsonl")
    assert level3.read_pass_rates(path) == rates
    path.write_text('{"index": 1, "n": 4, "correct": 5}\n')
    with pytest.raises(ValueError, match="0 <= correct <= n"):
        level3.read_pass_rates(path)


def test_sampling_without_vllm_says_what_to_do(prepared, tmp_path, capsys):
    try:
        import vllm  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("vLLM is installed here: this checks the message shown without it")
    args = ["level3-500", "--train", str(prepared / "math_train.parquet"), "--out", str(tmp_path / "o.parquet")]
    assert prepare.main([*args, "--model", "Qwen/Qwen2.5-Math-1.5B"]) == 2
    assert "needs vLLM on a GPU machine" in capsys.readouterr().err
    data = ["--data-dir", str(prepared / "eval")]
    assert evaluate.main(["--model", "Qwen/Qwen2.5-Math-1.5B", *data, "--out", str(tmp_path / "r")]) == 2
    assert "needs vLLM on a GPU machine" in capsys.readouterr().err


# ---------------------------------------------------------------- evaluation


def test_pass1_report_on_fixture_generations(tmp_path):
    out = tmp_path / "results"
    generations = FIXTURES / "generations_pass1.jsonl"
    assert evaluate.main(["--generations", str(generations), "--out", str(out), "--workers", "1"]) == 0
    report = json.loads((out / "results.json").read_text())
    expected = {"math500": (3, 2), "gsm8k": (3, 2), "minerva": (2, 1), "olympiadbench": (2, 2), "amc": (2, 1), "aime2024": (2, 0)}
    assert list(report["benchmarks"]) == list(expected)  # the paper's table order
    for name, (problems, correct) in expected.items():
        result = report["benchmarks"][name]
        assert (result["problems"], result["k"], result["correct"]) == (problems, 1, correct)
        assert result["avg@1"] == pytest.approx(100 * correct / problems)
    # Overall = total correct / total problems (8 / 14), not the mean of the six accuracies.
    assert report["overall"]["accuracy"] == pytest.approx(100 * 8 / 14)
    assert report["benchmarks"]["minerva"]["reasons"] == {"correct: math-verify": 1, "empty output": 1}
    table = (out / "results.md").read_text()
    assert "| MATH-500 | 3 | 1 | 66.7 |" in table
    assert "| **Overall** (total correct / total problems) | 14 | | 57.1 |" in table


def test_avg_at_k_and_pass_at_k():
    records = [
        {"data_source": "amc", "index": 0, "ground_truth": "23", "responses": ["\\boxed{23}", "\\boxed{22}", "\\boxed{23}", "x"]},
        {"data_source": "amc", "index": 1, "ground_truth": "9", "responses": ["\\boxed{8}"] * 4},
        {"data_source": "aime2024", "index": 0, "ground_truth": "130", "responses": ["\\boxed{130}"] * 4},
    ]
    report = evaluate.score_generations(records, {"k": 4}, workers=1)
    amc, aime = report.benchmarks
    assert (amc.name, amc.correct, amc.solved) == ("amc", 0.5, 1)
    assert (amc.avg_at_k, amc.pass_at_k) == (25.0, 50.0)
    assert aime.avg_at_k == 100.0
    assert report.overall == pytest.approx(100 * 1.5 / 3)
    assert "avg@4 (%) | pass@4 (%)" in report.markdown()


def test_generation_records_are_checked():
    record = {"data_source": "amc", "index": 0, "ground_truth": "1", "responses": ["\\boxed{1}"]}
    with pytest.raises(ValueError, match="appears twice"):
        evaluate.score_generations([record, dict(record)], {}, workers=1)
    with pytest.raises(ValueError, match="2 responses, other problems of amc have 1"):
        evaluate.score_generations([record, {**record, "index": 1, "responses": ["a", "b"]}], {}, workers=1)
    with pytest.raises(ValueError, match="no responses"):
        evaluate.score_generations([{**record, "responses": []}], {}, workers=1)
    with pytest.raises(sources.DataError, match=r"generation record 0: field 'ground_truth' must be str, got int 1"):
        evaluate.score_generations([{**record, "ground_truth": 1}], {}, workers=1)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('["not", "a", "record"]', "a generation record is a JSON object, got list"),
        ('{"data_source": "amc", "index": 0}', "generation record lacks ['ground_truth', 'responses']"),
        ('{"data_source": "amc", "index": true, "ground_truth": "1", "responses": []}', "field 'index' must be int or str, got bool"),
        ('{"data_source": "amc", "index": 0, "ground_truth": "1", "responses": "x"}', "field 'responses' must be list, got str"),
        ('{"data_source": "amc", "index": 0, "ground_truth": "1", "responses": ["a", 7]}', "responses[1] must be str, got int 7"),
        ('{"data_source": "amc", "index": 0, ', "not a JSON record"),
    ],
)
def test_each_bad_generation_record_is_named_by_file_and_line(tmp_path, capsys, line, message):
    good = '{"data_source": "amc", "index": 9, "ground_truth": "1", "responses": ["1"]}'
    generations = tmp_path / "generations.jsonl"
    generations.write_text(f"{good}\n\n{line}\n")
    assert evaluate.main(["--generations", str(generations), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert f"python -m recipes.math_data.evaluate: error: {generations}:3: {message}" in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_the_commands_run_from_the_checkout(tmp_path):
    """``python -m recipes.math_data.evaluate`` and ``... prepare`` as the recipes page runs them: from the repository's
    root, in processes of their own, with the console script's error line for bad input."""
    def run(*argv):
        return subprocess.run([sys.executable, "-m", *argv], capture_output=True, text=True, timeout=300, cwd=ROOT)

    done = run("recipes.math_data.evaluate", "--generations", str(FIXTURES / "generations_pass1.jsonl"), "--out",
               str(tmp_path), "--workers", "1")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "| AIME-2024 | 2 | 1 | 0.0 |" in done.stdout
    done = run("recipes.math_data.prepare", "eval", "--out-dir", str(tmp_path), "--benchmarks", "amc",
               f"--local=amc={FIXTURES / 'amc_test.jsonl'}")
    assert done.returncode == 0, done.stderr[-2000:]
    assert len(sources.read_verl_parquet(tmp_path / "amc.parquet")) == 2
    bad = run("recipes.math_data.prepare", "math", "--out", str(tmp_path / "m"), "--levels", "x")
    assert (bad.returncode, bad.stdout) == (2, "")
    assert bad.stderr == ("python -m recipes.math_data.prepare: error: --levels 'x': expected comma-separated integers "
                          "such as 3 or 3,4\n")
