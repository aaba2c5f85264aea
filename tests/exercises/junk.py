"""Inputs no checker may choke on, shared by the checker tests."""

import numpy as np
import torch

JUNK = [
    None,
    ...,
    "a string",
    b"bytes",
    True,
    float("nan"),
    float("inf"),
    -float("inf"),
    [1.0, 2.0],
    {"k": 1},
    torch.tensor([1.0, 2.0]),
    torch.tensor(float("nan")),
    np.array([1.0, 2.0]),
    object(),
]


def raises(*args):
    raise RuntimeError("boom")


def placeholder(*args):
    raise NotImplementedError


FUNCTION_JUNK = [
    raises,
    placeholder,
    lambda *a: None,
    lambda *a: "x",
    lambda *a: float("nan"),
    lambda *a: torch.tensor(float("inf")),
    lambda *a: torch.zeros(3),
    lambda *a: [1, 2, 3],
    lambda: 1.0,  # wrong number of arguments
]
