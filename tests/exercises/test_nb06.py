"""Checkers of notebook 06 (the learned module, the predicted error, the copied-row accuracy; and the permutation facts of section 1):
right answers pass, the usual slips are named, any input gets feedback."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from pe_lessons import LearnedPositionalEmbedding, exercises
from pe_lessons.exercises import Feedback
from pe_lessons.exercises.nb06 import check_copied_row_accuracy, check_learned_module
from pe_lessons.toy import ToyTransformer


class _NoCheck(nn.Module):
    def __init__(self, max_len, d_model):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(max_len, d_model) * 0.02)

    def forward(self, x):
        return x + self.weight[: x.shape[1]]


class _Right(_NoCheck):
    def forward(self, x):
        if x.shape[1] > self.weight.shape[0]:
            raise ValueError(f"sequence length {x.shape[1]} is longer than max_len {self.weight.shape[0]}")
        return super().forward(x)


class _InPlace(_Right):
    def forward(self, x):
        if x.shape[1] > self.weight.shape[0]:
            raise ValueError(f"sequence length {x.shape[1]} is longer than max_len {self.weight.shape[0]}")
        x += self.weight[: x.shape[1]]
        return x


class _Constant(_Right):
    def __init__(self, max_len, d_model):
        super().__init__(max_len, d_model)
        self.weight = nn.Parameter(torch.full((max_len, d_model), 0.02))


class _UnitStart(_Right):  # nn.Embedding's default N(0, 1): as large as the token embeddings
    def __init__(self, max_len, d_model):
        super().__init__(max_len, d_model)
        self.weight = nn.Parameter(torch.randn(max_len, d_model))


class _OffsetStart(_Right):  # a small spread around 5: every row far from zero (the std alone looks fine)
    def __init__(self, max_len, d_model):
        super().__init__(max_len, d_model)
        self.weight = nn.Parameter(torch.randn(max_len, d_model) * 0.02 + 5)


class _DetachesX(_Right):
    def forward(self, x):
        return super().forward(x.detach())


class _Wrapper(nn.Module):
    def __init__(self, max_len, d_model):
        super().__init__()
        self.inner = LearnedPositionalEmbedding(max_len, d_model)

    def forward(self, x):
        return self.inner(x)


class _Buffer(_NoCheck):
    def __init__(self, max_len, d_model):
        nn.Module.__init__(self)
        self.register_buffer("weight", torch.randn(max_len, d_model))


class _LastRows(_NoCheck):
    def forward(self, x):
        if x.shape[1] > self.weight.shape[0]:
            raise ValueError(f"{x.shape[1]} > {self.weight.shape[0]}")
        return x + self.weight[-x.shape[1] :]


class _VagueError(_NoCheck):
    def forward(self, x):
        if x.shape[1] > self.weight.shape[0]:
            raise ValueError("too long")
        return super().forward(x)


@pytest.mark.parametrize(
    "cls, ok, words",
    [
        (None, False, "Not answered"),
        (_Right, True, "trainable"),
        (LearnedPositionalEmbedding, False, "write the table yourself"),
        (_NoCheck, False, "IndexError|RuntimeError|without an error"),
        (_Buffer, False, "buffer"),
        (_LastRows, False, "last seq rows"),
        (_VagueError, False, "should contain the length"),
    ],
)
def test_check_learned_module(cls, ok, words):
    torch.manual_seed(5)
    state = torch.get_rng_state()
    feedback = check_learned_module(cls)
    assert torch.equal(torch.get_rng_state(), state)  # the student's global RNG is left alone
    assert feedback.ok is ok and re.search(words, feedback.message), feedback


class _Detached(nn.Module):
    def __init__(self, max_len, d_model):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(max_len, d_model) * 0.02)
        self.max_len = max_len

    def forward(self, x):
        if x.shape[1] > self.max_len:
            raise ValueError(f"length {x.shape[1]} > max_len {self.max_len}")
        return x + self.weight[: x.shape[1]].detach()


class _NoGrad(_Detached):
    def forward(self, x):
        if x.shape[1] > self.max_len:
            raise ValueError(f"length {x.shape[1]} > max_len {self.max_len}")
        with torch.no_grad():
            return x + self.weight[: x.shape[1]]


@pytest.mark.parametrize("cls", [_Detached, _NoGrad])
def test_learned_module_without_gradient_gets_the_no_gradient_message(cls):
    feedback = exercises.check_learned_module(cls)
    assert not feedback.ok and "No gradient reaches the table" in feedback.message


def _right(row, max_len):
    return (row + 0.5) / max_len


@pytest.mark.parametrize(
    "answer",
    [
        _right,
        lambda row, max_len: torch.tensor((row + 0.5) / max_len),
        lambda row, max_len: np_float((2 * row + 1) / (2 * max_len)),
    ],
)
def test_copied_row_accuracy_accepts_the_answer_in_any_ordinary_type(answer):
    feedback = check_copied_row_accuracy(answer)
    assert isinstance(feedback, Feedback) and feedback.ok, feedback


@pytest.mark.parametrize(
    "answer, hint",
    [
        (lambda row, max_len: row / max_len, "exactly at that row"),
        (lambda row, max_len: (row + 1) / max_len, "exactly at that row"),
        (lambda row, max_len: 1 - (row + 0.5) / max_len, "backwards"),
        (lambda row, max_len: 0.5, "coin flip"),
        (lambda row, max_len: (row + 0.5) / 12, "is not it"),  # hard-coded for the notebook's max_len
        (lambda row, max_len: 8.5 / 12, "is not it"),  # hard-coded for one setting
        (lambda row, max_len: 7, "not an accuracy"),
        (lambda row, max_len: "0.7", "Answer with"),
        (lambda row, max_len: math.nan, "NaN"),
    ],
)
def test_copied_row_accuracy_names_the_usual_slips_without_the_answer(answer, hint):
    feedback = check_copied_row_accuracy(answer)
    assert not feedback.ok and hint in feedback.message, feedback
    assert "0.5) /" not in feedback.message and "+ 1/2" not in feedback.message  # never the formula


def test_copied_row_accuracy_placeholders_and_errors():
    assert "Not answered" in check_copied_row_accuracy(None).message
    assert "Not answered" in check_copied_row_accuracy(lambda row, max_len: None).message

    def stub(row, max_len):
        raise NotImplementedError

    assert not check_copied_row_accuracy(stub).ok
    assert "must be a function" in check_copied_row_accuracy(0.7).message


def test_copied_row_accuracy_matches_the_twins_argument():
    """The formula counts the tie as one of two twins right: a position-blind pair of markers (the same row)
    gives both twins the same answer."""
    from pe_lessons.exercises.nb06 import _copied_row_accuracy

    for max_len in (8, 12):
        for row in range(max_len):
            right = sum(1.0 if p < row else 0.5 if p == row else 0.0 for p in range(max_len))
            assert _copied_row_accuracy(row, max_len) == pytest.approx(right / max_len)


# ---- the facts behind the answer: which changes break permutation equivariance ----

GEN = torch.Generator().manual_seed(0)


X = torch.randn(2, 9, 16, generator=GEN, dtype=torch.float64)


PERM = torch.randperm(9, generator=GEN)


def _gap(f, x=X):
    """max |f(permuted x) − permuted f(x)| over tokens (0 for an equivariant f)."""
    with torch.no_grad():
        return (f(x[:, PERM]) - f(x)[:, PERM]).abs().max().item()


def _attention(causal):
    def f(x):
        h = x[:, None]  # one head
        return F.scaled_dot_product_attention(h, h, h, is_causal=causal)[:, 0]

    return f


def test_facts_causal_mask_breaks_equivariance_unmasked_keeps_it():  # (a)
    assert _gap(_attention(False)) < 1e-12
    assert _gap(_attention(True)) > 0.01


def test_facts_pooling_layer_norm_and_mlp_keep_order_blind():  # (b), (c), (e)
    tokens = torch.randint(0, 10, (2, 9), generator=GEN)
    torch.manual_seed(0)
    pooled = ToyTransformer(10, 4, scheme="none", pooled=True).double()
    with torch.no_grad():
        assert (pooled(tokens[:, PERM]) - pooled(tokens)).abs().max().item() < 1e-12  # invariant
    assert _gap(nn.LayerNorm(16).double()) < 1e-12
    wide_mlp = nn.Sequential(nn.Linear(16, 128), nn.GELU(), nn.Linear(128, 16)).double()
    assert _gap(wide_mlp) < 1e-12


@pytest.mark.parametrize("scheme", ["sinusoidal", "rotary"])
def test_facts_positions_break_equivariance(scheme):  # (d), (f)
    tokens = torch.randint(0, 10, (2, 9), generator=GEN)
    torch.manual_seed(0)
    model = ToyTransformer(10, 4, scheme=scheme).double()
    with torch.no_grad():
        assert (model(tokens[:, PERM]) - model(tokens)[:, PERM]).abs().max().item() > 0.01
    torch.manual_seed(0)
    plain = ToyTransformer(10, 4, scheme="none").double()
    with torch.no_grad():
        assert (plain(tokens[:, PERM]) - plain(tokens)[:, PERM]).abs().max().item() < 1e-12


class _RefusesMaxLen(_NoCheck):  # off by one: seq == max_len has a row for every position, yet is refused
    def forward(self, x):
        if x.shape[1] >= self.weight.shape[0]:
            raise ValueError(f"sequence length {x.shape[1]} is too long for max_len {self.weight.shape[0]}")
        return super().forward(x)


class _AcceptsOneTooMany(_NoCheck):  # off by one the other way: max_len + 1 slips through
    def forward(self, x):
        if x.shape[1] > self.weight.shape[0] + 1:
            raise ValueError(f"sequence length {x.shape[1]} is too long for max_len {self.weight.shape[0]}")
        return x + torch.cat([self.weight, self.weight[-1:]])[: x.shape[1]]


class _HugeStart(LearnedPositionalEmbedding):
    def __init__(self, max_len, d_model):
        super().__init__(max_len, d_model, init_std=1e6)


class _FixedSize(_NoCheck):  # written for the notebook's sizes only
    def __init__(self, max_len, d_model):
        super().__init__(6, 4)

    def forward(self, x):
        if x.shape[1] > 6:
            raise ValueError(f"sequence length {x.shape[1]} is too long for max_len 6")
        return super().forward(x)


def test_check_learned_module_enforces_the_task():
    refuses = check_learned_module(_RefusesMaxLen)
    assert not refuses.ok and "off by one" in refuses.message
    one_more = check_learned_module(_AcceptsOneTooMany)
    assert not one_more.ok and "without an error" in one_more.message
    fixed = check_learned_module(_FixedSize)
    assert not fixed.ok and "[3, 8]" in fixed.message
    good = check_learned_module(_Right)
    assert good.ok and "[3, 8]" in good.message and "[10, 2]" in good.message


@pytest.mark.parametrize(
    "cls, words",
    [
        (_InPlace, "in place"),
        (_Constant, "start equal"),
        (_UnitStart, "small random values"),
        (_OffsetStart, "draw them around 0"),
        (_DetachesX, "No gradient reaches x"),
        (_Wrapper, "write the table yourself"),
        (_HugeStart, "write the table yourself"),
    ],
)
def test_check_learned_module_refuses_plausible_slips(cls, words):
    feedback = check_learned_module(cls)
    assert not feedback.ok and words in feedback.message, feedback


def np_float(value):
    import numpy as np

    return np.float64(value)


def _prediction(seq_len, max_len, in_range, one_out):
    pairs = seq_len * (seq_len - 1)
    inside = min(seq_len, max_len)
    out = seq_len - inside
    return (inside * (inside - 1) * in_range + 2 * inside * out * one_out + out * (out - 1) * 0.5) / pairs


@pytest.mark.parametrize(
    "answer",
    [
        _prediction,
        lambda L, m, a, o: torch.tensor(_prediction(L, m, a, o)),
        lambda L, m, a, o: np.float32(_prediction(L, m, a, o)),
    ],
)
def test_beyond_prediction_accepts_the_answer_in_any_ordinary_type(answer):
    from pe_lessons.exercises.nb06 import check_beyond_prediction

    assert check_beyond_prediction(answer).ok


def _independent(L, m, a, o):  # the two places drawn with replacement
    f = min(1, m / L)
    return f * f * a + 2 * f * (1 - f) * o + (1 - f) ** 2 * 0.5


def _no_twins(L, m, a, o):  # both-out sequences counted like one-out
    share_in = min(L, m) * (min(L, m) - 1) / (L * (L - 1))
    return share_in * a + (1 - share_in) * o


def _coin(L, m, a, o):
    share_in = min(L, m) * (min(L, m) - 1) / (L * (L - 1))
    return share_in * a + (1 - share_in) * 0.5


@pytest.mark.parametrize(
    "answer, hint",
    [
        (_independent, "never share a place"),
        (_no_twins, "twins"),
        (_coin, "does not flip a coin"),
        (lambda L, m, a, o: min(L, m) * (min(L, m) - 1) / (L * (L - 1)), "the others count too"),
        (lambda L, m, a, o: 0.3, "0, 1 or 2"),
        (lambda L, m, a, o: 2.0, "not an accuracy"),
        (lambda L, m, a, o: _prediction(L, m, a, o) if L > m else 0.5, "every marker is in range"),
    ],
)
def test_beyond_prediction_names_the_usual_slips_without_the_answer(answer, hint):
    from pe_lessons.exercises.nb06 import check_beyond_prediction

    feedback = check_beyond_prediction(answer)
    assert not feedback.ok and hint in feedback.message, feedback
    assert "0.5 *" not in feedback.message and "in_range *" not in feedback.message


def test_beyond_prediction_placeholders_errors_and_the_study():
    from pe_lessons import studies
    from pe_lessons.exercises.nb06 import check_beyond_prediction

    assert not check_beyond_prediction(None).ok and not check_beyond_prediction(lambda *a: None).ok

    def broken(*args):
        raise ZeroDivisionError("oops")

    assert "ZeroDivisionError" in check_beyond_prediction(broken).message
    # the prediction against the study's learned models: close at 16, the length the inputs were measured at
    order = studies.load("order")
    learned = order[order.model == "learned"]
    in_range = learned[(learned.measure == "accuracy") & (learned.length == 12)]["value"].mean()
    one_out = learned[learned.measure == "beyond_probe"]["value"].mean()
    measured = learned[(learned.measure == "accuracy") & (learned.length == 16)]["value"]
    assert abs(_prediction(16, 12, in_range, one_out) - measured.mean()) < measured.std()
