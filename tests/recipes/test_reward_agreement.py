"""The math reward against hand-given labels and against verl's own math scorers (imported from the
installed verl), on tests/recipes/fixtures/reward_pairs.yaml: every verdict of this package's two
answer rules equals the label except the misses the file lists, and the table in docs/using/recipes.md
is the one computed here."""

from pathlib import Path

import pytest

from recipes.math_data import agreement

ROOT = Path(__file__).resolve().parents[2]
PAIRS_FILE = Path(__file__).parent / "fixtures" / "reward_pairs.yaml"
DOCS = ROOT / "docs" / "using" / "recipes.md"
ISSUE_CATEGORIES = {
    "fractions and decimals", "symbolic", "intervals", "tuples", "units", "currency", "percent",
    "several parts", "no answer", "garbage", "very long output",
}


@pytest.fixture(scope="module")
def pairs():
    return agreement.load_pairs(PAIRS_FILE)


@pytest.fixture(scope="module")
def results(pairs):
    return agreement.verdicts(pairs, agreement.scorers())


def test_the_labelled_set(pairs):
    assert len(pairs) >= 100
    categories = {pair.category for pair in pairs}
    assert categories >= ISSUE_CATEGORIES
    assert all(sum(pair.category == category for pair in pairs) >= 9 for category in categories)
    assert max(len(pair.response) for pair in pairs) > 20000  # very long outputs are long


@pytest.mark.parametrize("rule", agreement.OURS)
def test_our_rules_agree_with_the_labels_except_the_listed_misses(pairs, results, rule):
    missed = {index for index in agreement.disagreements(pairs, results, rule)}
    listed = {index for index, pair in enumerate(pairs) if rule in pair.known_miss}
    unlisted = [(index, pairs[index].category, pairs[index].response[-80:], pairs[index].reference) for index in missed - listed]
    stale = [(index, pairs[index].category, pairs[index].reference) for index in listed - missed]
    assert not unlisted, f"{rule} disagrees with the label and the file does not say why: {unlisted}"
    assert not stale, f"{rule} now agrees on pairs listed as known misses (remove the entries): {stale}"


def test_training_rule_never_rewards_an_unfinished_output(pairs, results):
    truncated = [i for i, pair in enumerate(pairs) if pair.category == "truncated" and not pair.expected]
    assert truncated and not any(results[agreement.OURS_TRAINING][i] for i in truncated)


def test_docs_table_is_the_computed_one(pairs, results):
    table = agreement.agreement_table(pairs, results)
    text = DOCS.read_text(encoding="utf-8")
    assert agreement.TABLE_START + "\n" + table + agreement.TABLE_END in text, (
        "docs/using/recipes.md's agreement table is stale: run "
        "python -m recipes.math_data.agreement tests/recipes/fixtures/reward_pairs.yaml --write-docs docs/using/recipes.md\n"
        + table
    )
    timing = text.split(agreement.TIMING_START + "\n", 1)[1].split(agreement.TIMING_END, 1)[0]
    assert all(f"| {name} |" in timing for name in agreement.SCORER_NAMES)


def test_pairs_file_errors_name_the_item(tmp_path):
    bad = tmp_path / "pairs.yaml"
    bad.write_text("- {category: x, response: a, reference: '1', expected: yes-ish}\n")
    with pytest.raises(ValueError, match="item 0: expected must be true or false"):
        agreement.load_pairs(bad)
    bad.write_text("- {category: x, response: a, reference: '1', expected: true, known_miss: {verl math_verify: why}}\n")
    with pytest.raises(ValueError, match="known_miss names"):
        agreement.load_pairs(bad)
    bad.write_text("- {category: x, response: a, expected: true}\n")
    with pytest.raises(ValueError, match="lacks \\['reference'\\]"):
        agreement.load_pairs(bad)
