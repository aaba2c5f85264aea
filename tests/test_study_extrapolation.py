"""pe_lessons.studies.extrapolation: the committed results file is what the code computes (one whole setting
recomputed, all seeds), it covers the whole sweep, and its measurements mean what the module says."""

from __future__ import annotations

import math

import pandas as pd
import pytest
import torch

from pe_lessons import studies
from pe_lessons.studies import extrapolation as ex
from pe_lessons.toy import make_model, make_task

KEYS = ["measure", "task", "steps", "scheme", "base", "seed", "length", "position", "layer", "head"]


@pytest.fixture(scope="module")
def committed() -> pd.DataFrame:
    return studies.load("extrapolation")


def _keyed(frame: pd.DataFrame) -> pd.Series:
    return frame.set_index(KEYS)["value"].sort_index()


def test_committed_file_covers_the_sweep(committed):
    assert list(committed.columns) == ex.COLUMNS
    got = {(r.task, int(r.steps), r.scheme, None if math.isnan(r.base) else r.base) for r in committed.itertuples()}
    assert got == {(s.task, s.steps, s.scheme, s.base) for s in ex.settings()}
    acc = committed[committed.measure == "accuracy"]
    assert len(acc) == len(ex.settings()) * len(ex.SEEDS) * len(ex.LENGTHS)
    assert acc["value"].between(0, 1).all() and not acc["value"].isna().any()
    assert not _keyed(committed).index.duplicated().any()
    heads = committed[committed.measure == "head_far_weight"]
    assert len(heads) == 2 * len(ex.SCHEMES) * len(ex.SEEDS) * 8  # 2 tasks, 2 layers × 4 heads


def test_one_whole_setting_recomputes_to_the_committed_numbers(committed):
    """Rotary, base 10 000, near task, 200 steps, all five seeds: trained again and measured again.
    Training repeats bit for bit on one machine; another CPU's kernels can move the last bits, which
    200 steps of training amplify a little, hence the tolerances."""
    setting = ex.Setting("near", 200, "rotary", 1e4)
    fresh = _keyed(ex.run_setting(setting))
    mine = committed[(committed.task == "near") & (committed.steps == 200) & (committed.scheme == "rotary")]
    old = _keyed(mine[mine.base == 1e4])
    assert fresh.index.equals(old.index)
    for measure, tol in [("accuracy", 0.02), ("noise", 0.005), ("steps_to_criterion", 10)]:
        a, b = fresh.xs(measure, level="measure"), old.xs(measure, level="measure")
        gap = (a - b).abs().max()
        assert gap <= tol, f"{measure}: recomputed values differ from the committed file by up to {gap}"


def test_head_measures_mean_what_they_say():
    """On a briefly trained ALiBi model: the bias-only far weight is ALiBi's closed form, the head rows
    cover every head, ablating every head of a layer is recorded per layer."""
    setting = ex.Setting("near", max(ex.BUDGETS), "alibi")
    task = make_task("lag", n_symbols=8, lag=1)
    model = make_model(task, "alibi", seed=0, **ex.MODEL)
    history = pd.DataFrame({"seed": [0] * 30, "accuracy": [1.0] * 30})
    rows = pd.DataFrame(ex.measure(setting, [model], history, [0]), columns=ex.COLUMNS)
    assert rows.loc[rows.measure == "steps_to_criterion", "value"].item() == ex.WINDOW
    bias_far = rows[rows.measure == "bias_far_weight"].set_index(["layer", "head"])["value"]
    slopes = model.relative.slopes.double()
    for head, m in enumerate(slopes.tolist()):
        want = []
        for q in range(32, 64):  # keys 0 … q; far keys: distance ≥ 16
            w = torch.exp(-m * torch.arange(q + 1, dtype=torch.float64))
            want.append((w[16:].sum() / w.sum()).item())
        assert bias_far[0, head] == pytest.approx(sum(want) / len(want), abs=1e-4)
    assert rows[rows.measure == "head_ablated_accuracy"].shape[0] == 8
    assert rows[rows.measure == "layer_ablated_accuracy"]["head"].isna().all()
    blocks = rows[rows.measure == "position_accuracy"]
    assert blocks["position"].tolist() == list(range(0, 128, ex.POSITION_BLOCK))


def test_steps_to_criterion():
    acc = pd.Series([0.5] * 30 + [1.0] * 30)
    assert ex.steps_to_criterion(acc) == 30 + math.ceil(ex.WINDOW * (ex.CRITERION - 0.5) / 0.5)
    assert math.isnan(ex.steps_to_criterion(pd.Series([0.9] * 100)))


def test_command_line_rejects_unknown_study():
    from pe_lessons.studies.__main__ import main

    with pytest.raises(SystemExit):
        main(["nope"])
