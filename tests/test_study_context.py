"""pe_lessons.studies.context (notebook 10's study): the committed results are complete, and a part
recomputed now matches them."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from pe_lessons import studies
from pe_lessons.studies import __main__ as cli
from pe_lessons.studies import context


@pytest.fixture(scope="module")
def results() -> pd.DataFrame:
    return studies.load("context")


def test_results_cover_every_rule_seed_and_length(results):
    assert set(results["seed"]) == set(context.SEEDS) and len(context.SEEDS) >= 5
    main = results[results["base"] == context.BASE]
    zero = main[main["experiment"] == "zero-shot"]
    assert len(zero) == len(context.rules()) * len(context.SEEDS) * len(context.LENGTHS)
    assert set(zero["rule"]) == set(context.rules())
    assert zero["accuracy"].between(0, 1).all() and zero["entropy"].gt(0).all()
    tuned = main[main["experiment"] == "fine-tuned"]
    assert len(tuned) == len(context.FINE_TUNED_RULES) * len(context.SEEDS) * len(context.LENGTHS)
    excess = main[main["experiment"] == "logit excess"]
    assert len(excess) == 2 * len(context.SEEDS) and excess["excess"].ge(0).all()
    for base in context.BASES:
        swept = results[results["base"] == base]
        assert {"none", "PI"} <= set(swept[swept["experiment"] == "zero-shot"]["rule"]), base
        assert set(swept[swept["experiment"] == "fine-tuned"]["rule"]) >= {"none"}, base
    # accuracies are counts over EVAL_N sequences
    counts = zero["accuracy"] * context.EVAL_N
    assert ((counts - counts.round()).abs() < 1e-3).all()


def test_seed_0_recomputed_matches_the_committed_results(results):
    model = context.trained_model(0)
    rows = context.measure(
        model, seed=0, base=context.BASE, names=("none", "PI", "NTK", "YaRN"), lengths=(64,), entropy=False
    )
    committed = results[(results["experiment"] == "zero-shot") & (results["base"] == context.BASE)]
    committed = committed.set_index(["rule", "seed", "length"])["accuracy"]
    for row in rows:
        # the same computation; another CPU may move a few sequences (training amplifies the last bits)
        assert abs(row["accuracy"] - committed[row["rule"], 0, 64]) <= 0.02, row
    excess = results[results["experiment"] == "logit excess"].set_index(["rule", "seed"])["excess"]
    for reading, value in context.logit_excess(model).items():
        assert math.isclose(value, excess[reading, 0], rel_tol=0.05, abs_tol=2e-3), reading


def test_rules_are_what_their_names_say():
    table = context.rules()
    n = context.HEAD_DIM // 2
    assert list(table["pairs 1–7"]["scaling"]["long_factor"]) == [1.0] + [4.0] * (n - 1)
    assert list(table["pair 1 only"]["scaling"]["short_factor"]) == [1.0, 4.0] + [1.0] * (n - 2)
    assert table["PI + temperature"]["scaling"]["attention_factor"] == pytest.approx(0.1 * math.log(4) + 1)
    assert table["YaRN − temperature"]["scaling"]["attention_factor"] == 1.0
    assert table["NTK"]["base"] == pytest.approx(10000.0 * 4 ** (16 / 14))


def test_cli_writes_the_results_file(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(context, "run", lambda: pd.DataFrame({"seed": [0], "accuracy": [1.0]}))
    out = tmp_path / "context.csv"
    assert cli.main(["context", "--out", str(out)]) == 0
    assert pd.read_csv(out).to_dict("list") == {"seed": [0], "accuracy": [1.0]}
    assert "1 rows written" in capsys.readouterr().out
    with pytest.raises(ValueError, match="study must be one of"):
        studies.load("nope")
