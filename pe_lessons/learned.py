r"""Learned absolute position embeddings (BERT, GPT-2; Vaswani et al. 2017, Table 3 row E).

A trainable table :math:`P \in \mathbb{R}^{max\_len \times d_{model}}`, one row per
position, added to the token embeddings:

.. math::

    y[b, pos, :] = x[b, pos, :] + P[pos, :], \qquad pos = 0 \dots seq-1 .

Rows start as independent draws from :math:`\mathcal{N}(0, \sigma^2)` with
``σ = init_std = 0.02`` (BERT's and Hugging Face GPT-2's ``initializer_range``)
and are learned by gradient descent like any other weight. The table has
``max_len`` rows and no more: a sequence longer than ``max_len`` has positions
with no row at all. Indexing past the table is a classic crash (``index 512 is
out of bounds``, deep inside an embedding lookup); here it is a ``ValueError``
that names both numbers. :meth:`LearnedPositionalEmbedding.extended` makes a
longer copy whose extra rows are freshly initialised — present, but untrained.
"""

from __future__ import annotations

import torch
from torch import nn

from ._checks import check_d_model, check_embeddings, check_fits, check_int, check_real

__all__ = ["LearnedPositionalEmbedding"]


def _check_std(value: object) -> float:
    return check_real("init_std", value, above=0.0, hint="BERT and GPT-2 use 0.02")


class LearnedPositionalEmbedding(nn.Module):
    """Adds a trainable table to token embeddings: ``x + weight[:seq]``.

    ``x`` is ``[batch, seq, d_model]`` with a floating dtype; the output has ``x``'s shape
    and dtype (the table is cast once, after the lookup). ``weight`` is an
    ``nn.Parameter`` of shape ``[max_len, d_model]``, initialised from
    ``N(0, init_std²)`` — with ``generator`` when one is given, else torch's global RNG.
    ``seq > max_len`` raises ``ValueError`` naming both numbers.
    """

    weight: nn.Parameter

    def __init__(
        self,
        max_len: int,
        d_model: int,
        *,
        init_std: float = 0.02,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__()
        self.max_len = check_int("max_len", max_len, minimum=1)
        self.d_model = check_d_model(d_model)
        self.init_std = _check_std(init_std)
        if generator is not None and not isinstance(generator, torch.Generator):
            raise TypeError(f"generator must be a torch.Generator or None, got {type(generator).__name__}")
        check_fits("max_len × d_model", (self.max_len, self.d_model), torch.float32, what="the table")
        weight = torch.empty(self.max_len, self.d_model)
        weight.normal_(0.0, self.init_std, generator=generator)
        self.weight = nn.Parameter(weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = check_embeddings(x, self.d_model)
        seq = x.shape[1]
        if seq > self.max_len:
            raise ValueError(
                f"sequence length {seq} is longer than the learned table's max_len {self.max_len}: "
                f"positions {self.max_len}…{seq - 1} have no row (train on longer sequences, "
                "or use .extended(...) for untrained extra rows)"
            )
        return x + self.weight[:seq].to(x.dtype)

    def extended(self, max_len: int, *, generator: torch.Generator | None = None) -> LearnedPositionalEmbedding:
        """A copy with ``max_len`` rows: the trained rows, then fresh ``N(0, init_std²)`` rows.

        The new rows have never seen a gradient: the model runs at the longer length,
        but what it finds there is noise of the initial scale.
        """
        max_len = check_int("max_len", max_len, minimum=self.max_len)
        check_fits("max_len", (max_len, self.d_model), self.weight.dtype, what="the extended table")
        new = LearnedPositionalEmbedding(max_len, self.d_model, init_std=self.init_std, generator=generator)
        new = new.to(self.weight.device, self.weight.dtype)
        with torch.no_grad():
            new.weight[: self.max_len] = self.weight
        return new

    def extra_repr(self) -> str:
        return f"max_len={self.max_len}, d_model={self.d_model}, init_std={self.init_std:g}"
