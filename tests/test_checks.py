"""The shared argument checks: TypeError for a wrong kind of value, ValueError for a wrong value."""

import math

import numpy as np
import pytest
import torch

from pe_lessons._checks import (
    check_base,
    check_bool,
    check_choice,
    check_d_model,
    check_device,
    check_embeddings,
    check_fits,
    check_float_dtype,
    check_float_tensor,
    check_int,
    check_optional,
    check_positive_int,
    check_real,
    check_reals,
    check_tensor,
    format_bytes,
    memory_limit,
    set_memory_limit,
)


def test_check_bool_takes_only_true_and_false():
    assert check_bool("flag", True) is True and check_bool("flag", False) is False
    for value in (0, 1, None, "yes", np.bool_(True)):
        with pytest.raises(TypeError, match="flag must be True or False"):
            check_bool("flag", value)


def test_check_int_accepts_integers_of_any_kind_and_refuses_the_rest():
    assert check_int("n", 3) == 3 and type(check_int("n", np.int64(3))) is int
    assert check_int("n", torch.tensor(5).item()) == 5
    for value in (True, 3.0, "3", None, 2.5):
        with pytest.raises(TypeError, match="n must be an integer"):
            check_int("n", value)
    with pytest.raises(ValueError, match="n must be an integer >= 2, got 1"):
        check_int("n", 1, minimum=2)
    assert check_positive_int("n", 1) == 1
    with pytest.raises(ValueError, match=">= 1"):
        check_positive_int("n", 0)


def test_check_real_bounds_and_kinds():
    assert check_real("x", 2) == 2.0 and type(check_real("x", np.float32(0.5))) is float
    assert check_real("x", 0.0, minimum=0.0) == 0.0
    with pytest.raises(ValueError, match=r"x must be a finite number > 0, got 0\.0"):
        check_real("x", 0.0, above=0.0)
    with pytest.raises(ValueError, match=r">= 0 and < 1"):
        check_real("x", 1.0, minimum=0.0, below=1.0)
    assert check_real("x", 1, above=0.0, maximum=1.0) == 1.0
    with pytest.raises(ValueError, match=r"x must be a finite number > 0 and <= 1, got 1\.5"):
        check_real("x", 1.5, above=0.0, maximum=1.0)
    for bad in (math.nan, math.inf, -math.inf):
        with pytest.raises(ValueError, match="finite"):
            check_real("x", bad)
    for value in (True, "1", None, 1j, torch.tensor([1.0]), torch.tensor(True), torch.tensor(1.0, device="meta")):
        with pytest.raises(TypeError, match="x must be a real number"):
            check_real("x", value)
    # numbers in every ordinary type: Python, NumPy scalar, 0-d tensor
    for value in (0.5, np.float32(0.5), np.float64(0.5), torch.tensor(0.5), torch.tensor(0.5, dtype=torch.float64)):
        assert check_real("x", value) == 0.5 and type(check_real("x", value)) is float
    for value in (6, np.int64(6), np.uint8(6), torch.tensor(6), torch.tensor(6, dtype=torch.int32)):
        assert check_int("x", value) == 6 and type(check_int("x", value)) is int
    for value in (torch.tensor(6.0), np.float64(6.0), 6.0):
        with pytest.raises(TypeError, match="x must be an integer"):
            check_int("x", value)
    with pytest.raises(ValueError, match=r"p must be a probability in \[0, 1\) \(dropout\), got 1\.5"):
        check_real("p", 1.5, minimum=0.0, below=1.0, hint="dropout", what="a probability in [0, 1)")
    with pytest.raises(ValueError, match=r"the paper uses 10000"):
        check_base(1.0)


def test_check_reals_checks_the_length_and_every_item():
    assert check_reals("f", [1, 2.5], length=2, above=0) == (1.0, 2.5)
    assert check_reals("f", torch.tensor([1.0, 2.0]), length=2) == (1.0, 2.0)
    with pytest.raises(ValueError, match="f must be a list of 3 numbers, got 2"):
        check_reals("f", [1, 2], length=3)
    with pytest.raises(ValueError, match=r"f\[1\] must be a finite number > 0"):
        check_reals("f", [1, 0], length=2, above=0)
    with pytest.raises(TypeError, match=r"f\[0\] must be a real number"):
        check_reals("f", ["1"], length=1)
    with pytest.raises(TypeError, match="f must be a list"):
        check_reals("f", "12", length=2)


def test_check_optional_lets_none_through_and_checks_the_rest():
    assert check_optional(check_positive_int, "limit", None) is None
    assert check_optional(check_positive_int, "limit", 3) == 3
    with pytest.raises(ValueError, match="limit must be an integer >= 1"):
        check_optional(check_positive_int, "limit", 0)


def test_check_choice():
    assert check_choice("how", "mean", ("mean", "min")) == "mean"
    with pytest.raises(ValueError, match="how must be one of 'mean', 'min'; got 'max'"):
        check_choice("how", "max", ("mean", "min"))
    with pytest.raises(TypeError, match="how must be a string"):
        check_choice("how", 1, ("mean", "min"))


def test_widths_dtypes_and_tensors():
    assert check_d_model(4) == 4
    for bad in (0, -2, 3):
        with pytest.raises(ValueError, match="positive even"):
            check_d_model(bad)
    assert check_float_dtype(torch.bfloat16) is torch.bfloat16
    with pytest.raises(TypeError, match="floating dtype"):
        check_float_dtype(torch.int64)
    with pytest.raises(TypeError, match="torch.dtype"):
        check_float_dtype("float32")
    with pytest.raises(TypeError, match="x must be a torch.Tensor, got list"):
        check_tensor("x", [1.0])
    with pytest.raises(TypeError, match="floating values"):
        check_float_tensor("x", torch.arange(3))
    with pytest.raises(ValueError, match=r"\[batch, seq, d_model=4\]"):
        check_embeddings(torch.zeros(2, 3, 6), 4)


def test_memory_limit_and_check_fits(monkeypatch):
    monkeypatch.delenv("PE_LESSONS_MAX_BYTES", raising=False)
    try:
        set_memory_limit(1024)
        assert memory_limit() == 1024
        check_fits("n", [256], torch.float32)  # exactly the limit
        with pytest.raises(ValueError, match=r"^n: the result would have shape \[257\] and need 1\.0 KiB"):
            check_fits("n", [257], torch.float32)
        with pytest.raises(ValueError, match="nbytes must be an integer >= 1"):
            set_memory_limit(0)
    finally:
        set_memory_limit(None)
    monkeypatch.setenv("PE_LESSONS_MAX_BYTES", "2e3")
    assert memory_limit() == 2000
    monkeypatch.setenv("PE_LESSONS_MAX_BYTES", "lots")
    with pytest.raises(ValueError, match="PE_LESSONS_MAX_BYTES"):
        memory_limit()
    assert format_bytes(512) == "512 bytes" and format_bytes(3 * 2**30) == "3.0 GiB"


def test_check_device():
    assert check_device(None) == torch.device("cpu") and check_device("meta").type == "meta"
    with pytest.raises(TypeError, match="device must be a str or torch.device"):
        check_device(0.5)
    with pytest.raises(ValueError, match="must name a device"):
        check_device("gpu")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="asks for a GPU"):
            check_device("cuda")
