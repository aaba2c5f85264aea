"""Checkers of notebook 10 (critical pair, NTK base, YaRN range):
right answers pass, the usual slips are named, any input gets feedback."""

from __future__ import annotations

import math

import pytest
import torch

from pe_lessons.exercises.nb10 import CRITICAL, NTK, YARN, check_critical_pair, check_ntk_base, check_yarn_range
from pe_lessons.rotary import rope_frequencies, scaled_frequencies

JUNK = [float("nan"), float("inf"), "46", [1, 2, 3], torch.tensor([1.0, 2.0]), object(), True, -1e300]


def test_critical_pair():
    d, base, L = CRITICAL["head_dim"], CRITICAL["base"], CRITICAL["train_len"]
    wavelengths = 2 * math.pi / rope_frequencies(d, base)
    right = int((wavelengths >= L).nonzero()[0])  # found by scanning, not by the closed form
    assert check_critical_pair(right).ok and check_critical_pair(float(right)).ok
    assert check_critical_pair(torch.tensor(right)).ok
    assert not check_critical_pair(None).ok and "Not answered" in check_critical_pair(None).message
    assert "round up" in check_critical_pair(right - 1).message
    assert "feature index" in check_critical_pair(2 * right).message
    assert "2π" in check_critical_pair(math.ceil(d * math.log(L) / (2 * math.log(base)))).message
    for junk in JUNK + [right + 0.5, 10**6]:
        feedback = check_critical_pair(junk)
        assert not feedback.ok and feedback.message


def test_ntk_base():
    s = NTK["target_len"] / NTK["train_len"]
    d = NTK["head_dim"]
    right = NTK["base"] * s ** (d / (d - 2))
    # the defining property, checked independently: fastest pair kept, slowest slowed by exactly s
    theta, new = rope_frequencies(d, NTK["base"]), rope_frequencies(d, right)
    assert new[0] == theta[0] and math.isclose((theta[-1] / new[-1]).item(), s, rel_tol=1e-12)
    assert check_ntk_base(s, right).ok and check_ntk_base(torch.tensor(s), torch.tensor(right)).ok
    assert "inverse" in check_ntk_base(1 / s, right).message
    assert "s^((d-2)/d)" in check_ntk_base(s, NTK["base"] * s).message
    assert "upside down" in check_ntk_base(s, NTK["base"] * s ** ((d - 2) / d)).message
    assert not check_ntk_base(None, right).ok and "Not answered" in check_ntk_base(s, None).message
    for junk in JUNK:
        assert not check_ntk_base(s, junk).ok and not check_ntk_base(junk, right).ok


def test_yarn_range():
    p = YARN
    # the package's YaRN frequencies show the range: last untouched pair and first fully interpolated one
    theta = rope_frequencies(p["head_dim"], p["base"])
    rule = {"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": p["train_len"]}
    scale = theta / scaled_frequencies(p["head_dim"], rule, base=p["base"])[0]
    low = int((scale == 1).nonzero()[-1])
    high = int((scale == 8).nonzero()[0])
    assert check_yarn_range((low, high)).ok and check_yarn_range([float(low), float(high)]).ok
    assert "Swapped" in check_yarn_range((high, low)).message
    assert "round the low end down" in check_yarn_range((low + 1, high - 1)).message
    assert "Not answered" in check_yarn_range(None).message
    for junk in JUNK + [(1, 2, 3), (low, float("nan")), "ab"]:
        feedback = check_yarn_range(junk)
        assert not feedback.ok and feedback.message


@pytest.mark.parametrize("checker", [check_critical_pair, check_yarn_range])
def test_checkers_never_raise(checker):
    class Weird:
        def item(self):
            raise RuntimeError("boom")

        def __len__(self):
            raise RuntimeError("boom")

    for value in (Weird(), ..., (Weird(), Weird())):
        try:
            feedback = checker(value)
        except Exception as err:  # pragma: no cover - the point of the test
            pytest.fail(f"{checker.__name__} raised {err!r}")
        assert not feedback.ok
