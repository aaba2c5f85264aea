"""The checkers' shared machinery (:mod:`pe_lessons.exercises._feedback`), and a property of them all:
every exercise checker answers *any* answer with Feedback: it never raises, never says ✅ to
garbage (NaN, inf, text, wrong shapes or types, functions that raise), and names the problem.

The property test enumerates ``pe_lessons.exercises.__all__``: a checker added later is covered
automatically — and fails loudly until its required arguments are listed in ``SETTINGS``.
"""

from __future__ import annotations

import functools
import inspect
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from pe_lessons import exercises, inverse_frequencies, sinusoidal_table
from pe_lessons.exercises import _feedback

CHECKERS = sorted(name for name in exercises.__all__ if name.startswith("check_"))

_q = torch.tensor([0.3, -1.2, 0.7, 0.1, 2.0, -0.4, 0.9, 1.5], dtype=torch.float64)
_k = torch.tensor([1.1, 0.2, -0.8, 0.5, -1.3, 0.6, 0.4, -0.2], dtype=torch.float64)


#: Exercise settings (required arguments other than the answer) that make each checker's
#: exercise well posed, and which parameters hold the student's answer (default: the first).
def _fixed_table(max_len, d_model):
    angles = torch.arange(max_len, dtype=torch.float64)[:, None] * 10000.0 ** (
        -torch.arange(0, d_model, 2, dtype=torch.float64) / d_model
    )
    return torch.stack((angles.sin(), angles.cos()), -1).flatten(1).float()


SETTINGS: dict[str, dict] = {
    "check_wavelength": {"kwargs": {"column": 10, "d_model": 64}},
    "check_first_slow_column": {"kwargs": {"length": 1000, "d_model": 64}},
    "check_table_function": {},
    "check_bug_test": {"kwargs": {"bug": "sin_only"}},
    "check_mystery": {
        "answers": ["answer", "omega_col7"],
        "good": {"answer": "shifted_cos_exponent", "omega_col7": 10000 ** (-7 / 16)},
    },
    "check_dropout_fix": {},
    "check_sin_only_norm": {},
    "check_window_table": {},
    "check_dropout_module": {},
    "check_context_base": {},
    "check_predicted_wavelength": {"kwargs": {"column": 64, "d_model": 128, "base": 500000}},
    "check_first_honest_column": {"kwargs": {"n_positions": 45000, "pixels": 300, "d_model": 64}},
    "check_pair_block": {},
    "check_shift": {},
    "check_shift_by": {},
    "check_return_offset": {},
    "check_learned_module": {},
    "check_one_pass_rope": {},
    "check_one_graph_rope": {},
    "check_concat_offset": {},
    "check_beyond_prediction": {},
    "check_weight_conversion": {},
    "check_first_wrong_position": {
        "answers": ["position", "error"],
        "good": {"position": 257, "error": 1.0},
        "good_values": {"position": (257.0,), "error": (1.0, -1.0)},  # garbage may draw these (e.g. tensor(1.))
    },
    "check_angle_fix": {},
    "check_turn_base": {},
    "check_conversion_traffic": {},
    # checkers other branches add (entries for names that do not exist are ignored)
    "check_alias_period": {"kwargs": {"column": 14, "d_model": 32, "n_positions": 30000, "rows": 100}},
    "check_precision_fix": {
        "answers": ["predicted_error", "lossy_dtype", "fixed_table"],
        "good": {"predicted_error": 3e-3, "lossy_dtype": torch.float32, "fixed_table": _fixed_table},
    },
    "check_offset_dot": {},
    "check_copied_row_accuracy": {},
    "check_alibi_slopes": {},
    "check_alibi_far_share": {},
    "check_t5_bucket": {},
    "check_out_of_range": {},
    "check_ntk_base": {
        "kwargs": {"new_base": 1.0},
        "answers": ["scale", "new_base"],
        "good": {"scale": 8.0 ** (94 / 68), "new_base": 10000.0 * 8.0 ** (94 / 68 * 96 / 94)},
    },
    "check_rotary_reach": {"kwargs": {"base": 3e5, "head_dim": 12}},
    "check_base_for_reach": {"kwargs": {"offset": 60, "head_dim": 12}},
    "check_t5_scores": {},
    "check_yarn_frequencies": {},
    "check_stretch_ratio": {},
    "check_image_text_ids": {},
    "check_window_pairs": {},
    "check_mla_scores": {},
}


def _call_args(name: str, answer_param: str, answer: object) -> tuple[list, dict]:
    """Positional answer (or keyword) plus the settings, with the other answers at good values."""
    entry = SETTINGS[name]
    kwargs = dict(entry.get("kwargs", {}))
    kwargs.update({p: v for p, v in entry.get("good", {}).items() if p != answer_param})
    kwargs[answer_param] = answer
    return [], kwargs


def _answer_params(name: str) -> list[str]:
    params = list(inspect.signature(getattr(exercises, name)).parameters)
    return SETTINGS[name].get("answers", params[:1])


def test_every_checker_has_settings_for_its_required_arguments():
    missing = [name for name in CHECKERS if name not in SETTINGS]
    assert not missing, (
        f"checker(s) {missing} are not listed in tests/exercises/test_feedback.py SETTINGS: add their required "
        "exercise arguments there, so the garbage-answer property test covers them"
    )
    for name in CHECKERS:
        sig = inspect.signature(getattr(exercises, name))
        answers = _answer_params(name)
        required = [
            p.name
            for p in sig.parameters.values()
            if p.default is inspect.Parameter.empty
            and p.kind is not p.VAR_POSITIONAL
            and p.kind is not p.VAR_KEYWORD
            and p.name not in answers
        ]
        given_ = set(SETTINGS[name].get("kwargs", {})) | set(SETTINGS[name].get("good", {}))
        assert set(required) <= given_, f"{name}: SETTINGS lacks required argument(s) {sorted(set(required) - given_)}"


# ---------------------------------------------------------------- garbage answers


class _Broken:
    """An object whose every conversion fails."""

    def __repr__(self):
        raise RuntimeError("broken repr")

    def __float__(self):
        raise RuntimeError("broken float")

    def __int__(self):
        raise RuntimeError("broken int")

    def __index__(self):
        raise RuntimeError("broken index")

    def __iter__(self):
        raise RuntimeError("broken iter")

    def __len__(self):
        raise RuntimeError("broken len")

    def __eq__(self, other):
        raise RuntimeError("broken eq")

    __hash__ = object.__hash__


class _TensorLike(torch.Tensor):
    pass


def _raiser(exc: BaseException):
    def f(*args, **kwargs):
        raise exc

    return f


_numbers = st.one_of(
    st.sampled_from(
        [
            math.nan,
            math.inf,
            -math.inf,
            -0.0,
            1e308,
            -1e-320,
            10**400,
            -(10**30),
            1 + 2j,
            complex(math.nan, 0),
            True,
            False,
            np.float64("nan"),
            np.float32("inf"),
            np.True_,
            np.bool_(False),
            np.complex64(1j),
        ]
    ),
    st.floats(allow_nan=True, allow_infinity=True).filter(lambda v: not (1e-12 <= abs(v) <= 1e13)),  # no real answer
)
# text that cannot be a real answer: short runs of letters ("A", "ad f", …) answer some multiple-choice exercises
_texts = st.one_of(
    st.text(max_size=8).filter(lambda t: any(not (c.isascii() and c.isalpha()) and c not in ", " for c in t)),
    st.sampled_from(["ValueError", "", "nan", "36", "1e400", b"bytes"]),
)
_dtypes = st.sampled_from([torch.float32, torch.float64, torch.float16, torch.int64, torch.bool, torch.complex64])


@st.composite
def _tensors(draw):
    shape = draw(st.lists(st.integers(0, 5), max_size=3))
    dtype = draw(_dtypes)
    fill = draw(st.sampled_from([math.nan, math.inf, 0.0, 1.0, -3.5, None]))
    t = torch.randn(shape, dtype=torch.float64) if fill is None else torch.full(shape, fill, dtype=torch.float64)
    if dtype.is_complex:
        return t.to(dtype) * (1 + 1j)
    if not dtype.is_floating_point:
        return torch.nan_to_num(t, nan=0.0, posinf=0.0, neginf=0.0).to(dtype)
    return t.to(dtype)


_plain = st.one_of(
    _numbers,
    _texts,
    _tensors(),
    st.sampled_from(
        [
            torch.empty(2, 2, device="meta"),
            np.array([1.0, math.nan]),
            np.array([[True]]),
            np.zeros((2, 2)),
            torch.tensor(math.nan),
            torch.full((8,), math.nan),
            torch.full((70000, 16), math.nan),
            _Broken(),
            object(),
            type,
            int,
            ValueError,
            KeyError(),
            {"a": 1},
            {1, 2},
            (),
            [],
            [[]],
            [1, 2],
            ["a", "b"],
            [[1, 2], [3]],
            [math.nan] * 8,
            [[math.nan, 0], [0, 1]],
            [[1 + 1j, 0], [0, 1]],
            range(3),
            iter([1, 2]),
            slice(1),
            Ellipsis.__class__,
        ]
    ),
    st.lists(_numbers, max_size=9),
)
_callables = st.one_of(
    _plain.map(lambda value: lambda *args, **kwargs: value),
    st.sampled_from(
        [
            _raiser(e)
            for e in (
                NotImplementedError(),
                NotImplementedError("not for this dtype"),
                ValueError("bad"),
                ZeroDivisionError(),
                KeyError("k"),
                RecursionError(),
                TypeError(),
                SystemExit(1),
                AttributeError("x"),
            )
        ]
    ),
    st.sampled_from(
        [
            print,
            len,
            abs,
            torch.zeros_like,
            torch.sin,
            lambda *a: a,
            lambda x: x,
            nn.Identity,
            nn.Linear,
            lambda *a, **k: _Broken(),
            lambda *a, **k: _TensorLike(torch.zeros(3)),
            lambda *a, **k: torch.zeros(1, requires_grad=True),
        ]
    ),
)
GARBAGE = st.one_of(_plain, _callables)


def _scalar_value(answer):
    """The float value of a one-number answer (int, float, numpy or tensor scalar), else None."""
    try:
        value = torch.as_tensor(answer)
        return float(value) if value.numel() == 1 and not value.dtype.is_complex else None
    except Exception:
        return None


#: Answers right over a whole range (a bound a student derives): a garbage number drawn inside it (a random 0-d
#: tensor, say) may be right, so it is skipped, as a right number listed in "good_values" is.
GOOD_RANGES = {"check_precision_fix": {"predicted_error": (1e-4, 0.05)}}


@pytest.mark.parametrize("name", CHECKERS)
def test_garbage_answers_get_feedback_never_an_exception_nor_a_pass(name, monkeypatch):
    if name not in SETTINGS:
        pytest.fail(f"{name} is not listed in SETTINGS: add its required exercise arguments there")
    monkeypatch.setattr(_feedback, "STRICT", True)  # a checker's own slip must surface here, not as feedback
    check = getattr(exercises, name)

    @settings(max_examples=60, deadline=None)
    @given(answer=GARBAGE, which=st.sampled_from(_answer_params(name)))
    def run(answer, which):
        if answer is SETTINGS[name].get("good", {}).get(which, object()):  # e.g. ValueError: the right answer here
            return
        if _scalar_value(answer) in SETTINGS[name].get("good_values", {}).get(which, ()):  # a right number, drawn
            return
        low, high = GOOD_RANGES.get(name, {}).get(which, (math.inf, -math.inf))
        if (value := _scalar_value(answer)) is not None and low <= value <= high:  # maybe right: a range of answers
            return
        args, kwargs = _call_args(name, which, answer)
        with torch.random.fork_rng(devices=[]):
            feedback = check(*args, **kwargs)
        assert isinstance(feedback, exercises.Feedback), (name, answer, feedback)
        assert not feedback.ok, f"{name} said ✅ to {answer!r}: {feedback}"
        assert isinstance(feedback.message, str) and len(feedback.message) > 10
        assert str(feedback).startswith("❌ ")

    run()


# ---------------------------------------------------------------- good answers still pass


def _my_table(n, d):
    return sinusoidal_table(n, d)


def _paper_test(table):
    row0 = torch.tensor([0.0, 1.0] * (table.shape[1] // 2), dtype=torch.float64)
    return bool(torch.allclose(table[0].double(), row0))


def _numpy_test(table):  # returns np.True_ / np.False_
    t = table.double().numpy()
    return np.all(np.abs(t[:, 0::2] ** 2 + t[:, 1::2] ** 2 - 1) < 1e-3) & np.allclose(t[0, 1::2], 1.0)


def _add_positions(x, table, p, training):
    return torch.nn.functional.dropout(x + table[: x.shape[1]], p=p, training=training)


def _sin_only_norm(pos, d_model):
    return math.sqrt(2 * sum(math.sin(pos / 10000 ** (2 * i / d_model)) ** 2 for i in range(d_model // 2)))


def _window(start, n, d):
    return sinusoidal_table(start + n, d)[start:] if start < 10 else _window_far(start, n, d)


def _window_far(start, n, d):  # sinusoidal_table's rows, pos = qB + r, for the window's positions only
    pos = torch.arange(start, start + n)
    q, r = (pos // 256).double()[:, None], (pos % 256).double()[:, None]
    omega = inverse_frequencies(d)  # sinusoidal_table's ω, to the last bit
    sin_q, cos_q = torch.sin(q * 256 * omega).float(), torch.cos(q * 256 * omega).float()
    sin_r, cos_r = torch.sin(r * omega).float(), torch.cos(r * omega).float()
    return torch.stack((sin_q * cos_r + cos_q * sin_r, cos_q * cos_r - sin_q * sin_r), -1).flatten(1)


class _AddPositions(nn.Module):
    def __init__(self, table, p):
        super().__init__()
        self.table, self.drop = table, nn.Dropout(p)

    def forward(self, x):
        return self.drop(x + self.table[: x.shape[1]])


def _shift(pe_pos, pe_k):
    s, c = pe_pos[0::2], pe_pos[1::2]
    sk, ck = pe_k[0::2], pe_k[1::2]
    return torch.stack((s * ck + c * sk, c * ck - s * sk), -1).flatten()


def _shift_by(pe_pos, pe_1, k):  # repeated doubling: about 2·log2(k) row products
    while k:
        if k & 1:
            pe_pos = _shift(pe_pos, pe_1)
        pe_1, k = _shift(pe_1, pe_1), k >> 1
    return pe_pos


def _to_half(x):
    return torch.cat((x[..., 0::2], x[..., 1::2]), -1)


def _block():
    b = 3 * 10000 ** (-2 / 8)
    return [[math.cos(b), math.sin(b)], [-math.sin(b), math.cos(b)]]


CORRECT = {
    "check_wavelength": 2 * math.pi * 10000 ** (10 / 64),
    "check_first_slow_column": np.int64(36),
    "check_table_function": _my_table,
    "check_bug_test": _numpy_test,
    "check_mystery": "shifted_cos_exponent",
    "check_dropout_fix": _add_positions,
    "check_sin_only_norm": _sin_only_norm,
    "check_window_table": _window,
    "check_dropout_module": _AddPositions,
    "check_context_base": np.float32((1_000_000 / (2 * math.pi)) ** (128 / 126)),
    "check_predicted_wavelength": torch.tensor(2 * math.pi * 500000 ** (64 / 128)),
    "check_first_honest_column": torch.tensor(28),
    "check_pair_block": np.array(_block()),
    "check_shift": _shift,
    "check_shift_by": lambda pe_pos, pe_1, k: _shift_by(pe_pos, pe_1, k),
    "check_return_offset": torch.tensor(44),
    "check_learned_module": lambda max_len, d_model: _OffByOne(max_len, d_model),
    "check_one_pass_rope": lambda x, cos, sin: torch.view_as_real(
        torch.view_as_complex(x.unflatten(-1, (-1, 2))) * torch.polar(torch.ones_like(cos), torch.atan2(sin, cos))
    ).flatten(-2),
    "check_one_graph_rope": lambda x, positions: __import__("pe_lessons").apply_rope(x, positions, layout="half"),
    "check_concat_offset": lambda k, d, base=10000.0: _concat_offset(k, d, base),
    "check_beyond_prediction": lambda L, m, a, o: torch.tensor(
        (
            min(L, m) * (min(L, m) - 1) * a
            + 2 * min(L, m) * (L - min(L, m)) * o
            + (L - min(L, m)) * (L - min(L, m) - 1) / 2
        )
        / (L * (L - 1))
    ),
    "check_copied_row_accuracy": lambda row, max_len: np.float32((row + 0.5) / max_len),
    "check_weight_conversion": lambda W, b, heads: tuple(
        t.reshape(heads, -1, *t.shape[1:])[:, _to_half(torch.arange(W.shape[0] // heads)).argsort()]
        .reshape(t.shape)
        .numpy()  # NumPy arrays are fine too
        for t in (W, b)
    ),
    "check_first_wrong_position": torch.tensor(257),
    "check_angle_fix": lambda p, d, base=10000.0: _cos_sin(p, d, base),
    "check_turn_base": lambda d, context, pair: (context / (2 * math.pi)) ** (d / (2 * pair)),
    "check_conversion_traffic": torch.tensor(9.0),
    "check_image_text_ids": np.array(
        [
            [0, 1, 2, 3, 4, 4, 4, 4, 4, 4, 7, 8],
            [0, 1, 2, 3, 4, 4, 5, 5, 6, 6, 7, 8],
            [0, 1, 2, 3, 4, 5, 4, 5, 4, 5, 7, 8],
        ]
    ),
    "check_window_pairs": np.int64(28),
    "check_t5_bucket": np.int64(14),
    "check_alibi_slopes": np.array([2.0**-2, 2.0**-4, 2.0**-6, 2.0**-8, 2.0**-1, 2.0**-3]),
    "check_alibi_far_share": torch.tensor(0.223),
    "check_rotary_reach": torch.tensor(math.pi * 3e5 ** (2 / 12)),
    "check_base_for_reach": np.float32((60 / math.pi) ** 6),
    "check_t5_scores": lambda q, k, table, max_distance: (
        q @ k.transpose(-1, -2)
        + table[
            __import__("pe_lessons").t5_relative_bucket(
                torch.arange(q.shape[1])[None, :] - torch.arange(q.shape[1])[:, None],
                bidirectional=False,
                num_buckets=table.shape[0],
                max_distance=max_distance,
            )
        ].permute(2, 0, 1)
    ),
    "check_mla_scores": lambda q_nope, q_rope, latent, k_rope, w_uk, positions: (
        (q_nope @ w_uk) @ latent.transpose(-2, -1)
        + __import__("pe_lessons").apply_rope(q_rope, positions)
        @ __import__("pe_lessons").apply_rope(k_rope, positions).transpose(-2, -1)
    ),
}


def _concat_offset(k, d_model, base):
    from pe_lessons.offsets import offset_matrix

    perm = torch.cat([torch.arange(0, d_model, 2), torch.arange(1, d_model, 2)])
    return offset_matrix(k, d_model, base)[perm][:, perm].numpy()  # a NumPy array is fine too


def _cos_sin(positions, head_dim, base):
    angles = positions.double()[:, None] * base ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    return angles.cos().float(), angles.sin().float()


@pytest.mark.parametrize("name", [n for n in CHECKERS if n in CORRECT])
def test_correct_answers_in_any_numeric_form_pass(name, monkeypatch):
    monkeypatch.setattr(_feedback, "STRICT", True)
    answer = CORRECT[name]
    if name == "check_first_honest_column":
        want = next(j for j in range(64) if 2 * math.pi * 10000 ** (2 * (j // 2) / 64) > 2 * 45000 / 300)
        answer = torch.tensor(want)
    args, kwargs = _call_args(name, _answer_params(name)[0], answer)
    feedback = getattr(exercises, name)(*args, **kwargs)
    assert feedback.ok, (name, feedback)


# ---------------------------------------------------------------- known failure cases, one by one


@pytest.mark.parametrize("answer", ["abc", [1, 2], 1 + 2j, math.nan, math.inf, -math.inf, 10**400, True, torch.ones(3)])
@pytest.mark.parametrize(
    "check, kwargs",
    [
        (exercises.check_wavelength, dict(column=10, d_model=64)),
        (exercises.check_return_offset, {}),
        (exercises.check_predicted_wavelength, dict(column=64, d_model=128)),
        (exercises.check_conversion_traffic, {}),
        (exercises.check_first_slow_column, dict(length=1000, d_model=64)),
        (exercises.check_first_honest_column, dict(n_positions=45000, pixels=300, d_model=64)),
    ],
)
def test_non_numbers_get_feedback_that_names_them(check, kwargs, answer):
    feedback = check(answer, **kwargs)
    integer_checker = check in (
        exercises.check_return_offset,
        exercises.check_first_slow_column,
        exercises.check_first_honest_column,
    )
    assert not feedback.ok, feedback
    if integer_checker and type(answer) is int and answer > 10**300:  # an integer, just far out of range
        assert "between 0 and 63" in feedback.message or "outside the search range" in feedback.message
        return
    assert feedback.message.startswith("Answer with"), feedback
    text = feedback.message.lower()
    if isinstance(answer, str):
        assert "text" in text
    elif isinstance(answer, list):
        assert "list" in text
    elif isinstance(answer, complex):
        assert "complex" in text
    elif isinstance(answer, bool):
        assert "true" in text
    elif isinstance(answer, torch.Tensor):
        assert "shape [3]" in text
    elif integer_checker:
        assert "non-integer" in text
    elif isinstance(answer, int):
        assert "too large" in text
    elif math.isnan(answer):
        assert "nan" in text
    else:
        assert "infinite" in text


def test_a_stub_is_not_answered_yet_but_a_library_not_implemented_error_is_an_error():
    def my_table(max_len, d_model):
        raise NotImplementedError

    feedback = exercises.check_table_function(my_table)
    assert not feedback.ok and "Not answered yet: my_table still raises NotImplementedError" in feedback.message
    assert "placeholder" not in feedback.message
    assert exercises.check_table_function(None).message == _feedback.NOT_DONE  # `None` / `...` keep their message

    def meta_table(max_len, d_model):  # torch's own NotImplementedError: a real error of the student's code
        return torch.tensor(torch.zeros(max_len, d_model, device="meta").tolist())

    feedback = exercises.check_table_function(meta_table)
    assert not feedback.ok and "raised NotImplementedError" in feedback.message and "meta" in feedback.message

    class Stub(nn.Module):
        def __init__(self, max_len, d_model):
            super().__init__()
            raise NotImplementedError

    assert "Stub still raises NotImplementedError" in exercises.check_learned_module(Stub).message
    for check, stubbed in (
        (exercises.check_bug_test, "my_test"),
        (exercises.check_shift, "my_shift"),
        (exercises.check_dropout_fix, "add_positions"),
    ):
        args = ("sin_only",) if check is exercises.check_bug_test else ()
        message = check(_raiser(NotImplementedError()), *args).message
        assert f"{stubbed} still raises NotImplementedError" in message, message


def test_setup_errors_are_still_errors():
    with pytest.raises(ValueError, match="bug must be one of"):
        exercises.check_bug_test(_paper_test, "no_such_bug")
    with pytest.raises(ValueError, match="low_bytes"):
        exercises.check_conversion_traffic(9.0, low_bytes=4, work_bytes=2)


def test_the_safety_net_turns_an_unforeseen_error_into_feedback(monkeypatch):
    @_feedback.checker
    def check_fragile(answer):
        return _feedback.passed("ok") if 1 / answer else _feedback.failed("no")

    feedback = check_fragile(0)
    assert not feedback.ok and "ZeroDivisionError" in feedback.message
    monkeypatch.setattr(_feedback, "STRICT", True)
    with pytest.raises(ZeroDivisionError):
        check_fragile(0)
    assert inspect.signature(check_fragile).parameters.keys() == {"answer"}


# ---------------------------------------------------------------- Feedback and the package's exports


def test_feedback_prints_as_one_line_and_is_truthy_when_ok():
    assert str(exercises.Feedback(True, "fine")) == "✅ fine" and bool(exercises.Feedback(True, "x"))
    assert repr(exercises.Feedback(False, "no")) == "❌ no" and not exercises.Feedback(False, "x")


def test_every_checker_is_exported_by_its_module_and_the_package():
    import importlib
    import inspect

    for number in range(1, 12):
        module = importlib.import_module(f"pe_lessons.exercises.nb{number:02d}")
        defined = {
            name
            for name, fn in inspect.getmembers(module, inspect.isfunction)
            if name.startswith("check_") and fn.__module__ == module.__name__
        }
        assert defined, f"{module.__name__} defines no checker"
        assert defined <= set(module.__all__), f"{module.__name__}: not in __all__: {defined - set(module.__all__)}"
        assert defined <= set(exercises.__all__) and all(getattr(exercises, name) for name in defined)


# ---------------------------------------------------------------- time limits: a student's loop never hangs a checker


_LOOPS_ENTERED = [0]  # how many times a student's never-ending loop below was entered


def _loop(*args, **kwargs):
    _LOOPS_ENTERED[0] += 1
    while True:
        pass


class _LoopingModule(nn.Module):
    def __init__(self, *args, **kwargs):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(6, 4))

    def forward(self, x):
        _LOOPS_ENTERED[0] += 1
        while True:
            pass


def _swallowing_loop(*args, **kwargs):  # `except Exception` inside the loop must not defeat the limit
    _LOOPS_ENTERED[0] += 1
    while True:
        try:
            while True:
                pass
        except Exception:
            pass


def _no_timer_left():
    import signal

    if hasattr(signal, "setitimer"):
        assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
        assert signal.getsignal(signal.SIGALRM) is not _feedback._on_alarm


def _drop_all(*args, **kwargs):
    """A function that "drops everything": zeros shaped like its first tensor argument."""
    first = next((a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)), torch.zeros(3))
    return torch.zeros_like(first)


class _DropAllModule(nn.Module):
    def __init__(self, *args, **kwargs):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(6, 4))

    def forward(self, x):
        return torch.zeros_like(x) + 0 * self.weight.sum()


@pytest.mark.parametrize("name", CHECKERS)
def test_a_function_that_drops_everything_never_passes(name, monkeypatch):
    """Every public checker (a new one too): an answer that returns all zeros is never ✅."""
    monkeypatch.setattr(_feedback, "STRICT", True)
    check = getattr(exercises, name)
    for which in _answer_params(name):
        for answer in (_drop_all, _DropAllModule):
            args, kwargs = _call_args(name, which, answer)
            with torch.random.fork_rng(devices=[]):
                feedback = check(*args, **kwargs)
            assert not feedback.ok, (name, which, feedback)


@pytest.mark.parametrize("name", CHECKERS)
def test_a_student_loop_that_never_ends_gets_feedback_within_the_limit(name, monkeypatch):
    """Every public checker (a new one too), every answer parameter: a function, a class or a module
    whose forward never returns is stopped and named — never a hang, never ✅."""
    import time

    monkeypatch.setattr(_feedback, "TIME_LIMIT", 0.2)
    monkeypatch.setattr(_feedback, "CHECK_TIME_LIMIT", 1.0)
    check = getattr(exercises, name)
    for which in _answer_params(name):
        for answer in (_loop, _LoopingModule, _swallowing_loop):
            args, kwargs = _call_args(name, which, answer)
            _LOOPS_ENTERED[0] = 0
            start = time.monotonic()
            feedback = check(*args, **kwargs)
            took = time.monotonic() - start
            assert not feedback.ok, (name, which, feedback)
            assert took < 2.5, (
                f"{name} took {took:.1f} s on a looping {answer.__name__}"
            )  # 1 s limit + slack for a loaded CI machine
            if _LOOPS_ENTERED[0]:  # the student's loop ran and was stopped: the message says why
                assert "did not return within" in feedback.message and "a loop that never ends?" in feedback.message
            _no_timer_left()


def test_time_limit_stops_loops_and_sleeps_and_leaves_no_timer():
    import time

    for fn, args in ((_loop, ()), (_swallowing_loop, ()), (time.sleep, (30,))):
        start = time.monotonic()
        value, problem = _feedback.attempt("f()", fn, *args, seconds=0.2)
        assert value is None and problem is not None and time.monotonic() - start < 1.5
        assert problem.message == "f(): your function did not return within 0.2 s: a loop that never ends?"
        _no_timer_left()
    assert _feedback.attempt("g(2)", lambda x: x * 3, 2, seconds=0.2) == (6, None)
    _no_timer_left()


def test_time_limits_nest_and_restore_a_timer_set_before():
    import signal
    import time

    if not hasattr(signal, "setitimer"):
        pytest.skip("no SIGALRM on this platform")
    fired = []
    old = signal.signal(signal.SIGALRM, lambda s, f: fired.append(time.monotonic()))
    try:
        start = time.monotonic()
        signal.setitimer(signal.ITIMER_REAL, 0.6)
        with _feedback.time_limit(0.3):
            value, problem = _feedback.attempt("inner()", _loop, seconds=5.0)  # the outer limit is nearer
        assert value is None and "within 0.3 s" in problem.message and time.monotonic() - start < 1.5  # not 5 s
        assert not fired  # the earlier timer is not due yet …
        time.sleep(0.5)
        assert len(fired) == 1 and 0.5 < fired[0] - start < 0.9  # … and fires on time afterwards
        signal.setitimer(signal.ITIMER_REAL, 0.1)  # a timer that falls due during our limit still fires
        fired.clear()
        _feedback.attempt("h()", _loop, seconds=0.4)
        assert len(fired) == 1
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    _no_timer_left()


def test_time_limit_off_the_main_thread_uses_the_trace_fallback():
    import sys
    import threading
    import time

    results = []

    def run():
        start = time.monotonic()
        results.append((_feedback.attempt("t()", _loop, seconds=0.2), time.monotonic() - start, sys.gettrace()))

    if sys.gettrace() is not None:
        pytest.skip("a tracer (debugger, coverage) is active: the fallback steps aside for it")
    thread = threading.Thread(target=run)
    thread.start()
    thread.join(5)
    assert not thread.is_alive()
    (value, problem), took, tracer_after = results[0]
    assert value is None and "did not return within 0.2 s" in problem.message and took < 1.5
    assert tracer_after is None  # no trace function left behind


# ---------------------------------------------------------------- right answers in every ordinary type


def _forms(value):
    """The same number as a Python int/float, NumPy scalar, 0-d and 1-element array/tensor."""
    forms = [value, float(value), np.float64(value), np.float32(value), torch.tensor(float(value), dtype=torch.float64)]
    forms += [np.array(float(value)), torch.tensor([float(value)], dtype=torch.float64)]
    if float(value) == int(value):
        forms += [int(value), np.int64(int(value)), torch.tensor(int(value)), np.array([int(value)])]
    return forms


@pytest.mark.parametrize("value", [6, 6.0, np.int32(6), np.float32(6.0), torch.tensor(6.0), torch.tensor([6])])
def test_as_integer_takes_an_integer_in_any_ordinary_form(value):
    assert _feedback.as_integer(value) == (6, None)


@pytest.mark.parametrize("value", [6.5, np.float32(6.5), torch.tensor(6.5), "6", True, math.nan, math.inf])
def test_as_integer_refuses_non_integers_by_name(value):
    got, problem = _feedback.as_integer(value)
    assert got is None and not problem.ok and problem.message.startswith("Answer with")


def test_as_values_keeps_python_floats_in_float64():
    row = [0.1, 1 / 3, math.pi]
    values, problem = _feedback.as_values(row)
    assert problem is None and values.dtype == torch.float64 and values.tolist() == row  # no float32 round trip
    for form in (tuple(row), np.array(row), torch.tensor(row, dtype=torch.float64), [np.float64(v) for v in row]):
        assert _feedback.as_values(form)[0].tolist() == row
    assert _feedback.as_values([torch.tensor(0.5), 2])[0].tolist() == [0.5, 2.0]
    for bad in ("abc", [1 + 1j], [[1, 2], [3]], torch.ones(2, device="meta"), np.array([True]), [object()]):
        assert _feedback.as_values(bad)[0] is None and not _feedback.as_values(bad)[1].ok
    assert _feedback.precision(torch.ones(1)) == 2.0**-23 and _feedback.precision([1.0]) == 2.0**-52


@pytest.mark.parametrize(
    "name",
    [n for n in CHECKERS if n in CORRECT and isinstance(CORRECT[n], (int, float, np.number, torch.Tensor))],
)
def test_correct_numbers_pass_in_every_ordinary_type(name, monkeypatch):
    monkeypatch.setattr(_feedback, "STRICT", True)
    want = CORRECT[name]
    if name == "check_first_honest_column":
        want = next(j for j in range(64) if 2 * math.pi * 10000 ** (2 * (j // 2) / 64) > 2 * 45000 / 300)
    want = want.item() if isinstance(want, (torch.Tensor, np.generic)) else want
    for form in _forms(want):
        args, kwargs = _call_args(name, _answer_params(name)[0], form)
        feedback = getattr(exercises, name)(*args, **kwargs)
        assert feedback.ok, (name, form, feedback)


def test_dropout_fix_refuses_a_function_that_drops_everything():
    def drop_all(x, table, p, training):
        out = x + table[: x.shape[1]]
        return torch.zeros_like(out) if training else out

    feedback = exercises.check_dropout_fix(drop_all)
    assert not feedback.ok and "0% of the entries were kept" in feedback.message
    assert exercises.check_dropout_fix(_add_positions).ok


class _OffByOne(nn.Module):
    def __init__(self, max_len, d_model, shift=0):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(max_len, d_model) * 0.02)
        self.max_len, self.shift = max_len, shift

    def forward(self, x):
        if x.shape[1] > self.max_len + self.shift:
            raise ValueError(f"seq_len {x.shape[1]} > max_len {self.max_len}")
        return x + torch.cat([self.weight, self.weight])[: x.shape[1]]


@pytest.mark.parametrize("shift", [-1, 1])
def test_learned_module_catches_an_off_by_one_either_way(shift):
    cls = functools.partial(_OffByOne, shift=shift)
    cls.__name__ = "OffByOne"
    feedback = exercises.check_learned_module(cls)
    assert not feedback.ok, feedback
    assert ("off by one" in feedback.message) if shift < 0 else ("7 positions" in feedback.message)
    assert exercises.check_learned_module(functools.partial(_OffByOne, shift=0)).ok


def test_a_row_is_compared_at_the_precision_it_was_computed_in():
    """A list of Python floats keeps float64 values; a float32 row is judged at float32 precision."""
    assert exercises.check_shift(lambda a, b: _shift(a, b).tolist()).ok
    assert exercises.check_shift(lambda a, b: _shift(a.float(), b.float())).ok
    assert not exercises.check_shift(lambda a, b: _shift(a, b).float() + 1e-3).ok
