"""pe_lessons: the helper package of the pe-lessons course on positional encoding.

One module per idea; the notebooks import from here and the tests check it.

- ``sinusoidal``: the paper's formula, accurate vectorized tables, the additive module
- ``variants``: correct conventions and the bugs found in the wild, and ``diagnose``
- ``offsets``: the linear-offset property (rotation matrices, similarity, table by rotation)
- ``learned``: a trainable position table; ``toy``: a tiny Transformer with pluggable positions
- ``rotary``: rotary position embeddings (RoPE), both layouts, context-extension rules (fast path in ``_rope_fast``)
- ``relative``: relative position biases added to attention scores (ALiBi, T5 buckets)
- ``models``: positions in today's models from their configs (Qwen2-VL, Pixtral, DeepSeek MLA, Llama 4, Gemma 3, p-RoPE)
- ``plots`` / ``widgets``: Altair charts and ipywidgets explorers (imported on demand)
- ``baselines``: the naive and library versions the course measures and checks against
- ``bench`` (with ``timing`` and ``optrace``): honest benchmarks, ``python -m pe_lessons.bench``
- ``exercises``: one checker per exercise
"""

from importlib import metadata as _metadata

from ._checks import memory_limit, set_memory_limit
from .learned import LearnedPositionalEmbedding
from .offsets import best_linear_map, offset_matrix, relative_similarity, table_by_rotation
from .relative import (
    ALiBiBias,
    RelativePositionBias,
    alibi_bias,
    alibi_slopes,
    t5_bucket_edges,
    t5_relative_bucket,
)
from .rotary import (
    RotaryEmbedding,
    apply_rope,
    rope_formula,
    rope_frequencies,
    scaled_frequencies,
    to_half_layout,
    to_interleaved_layout,
)
from .sinusoidal import (
    SinusoidalPositionalEncoding,
    inverse_frequencies,
    pe_formula,
    sinusoidal_table,
    wavelengths,
)
from .variants import VARIANTS, Diagnosis, diagnose

try:  # the version is written once, in pyproject.toml
    __version__ = _metadata.version("pe-lessons")
except _metadata.PackageNotFoundError:  # imported from a checkout that was never installed
    __version__ = "0+unknown"

__all__ = [
    "memory_limit",
    "set_memory_limit",
    "SinusoidalPositionalEncoding",
    "inverse_frequencies",
    "pe_formula",
    "sinusoidal_table",
    "wavelengths",
    "LearnedPositionalEmbedding",
    "VARIANTS",
    "Diagnosis",
    "diagnose",
    "best_linear_map",
    "offset_matrix",
    "relative_similarity",
    "table_by_rotation",
    "RotaryEmbedding",
    "apply_rope",
    "rope_frequencies",
    "rope_formula",
    "scaled_frequencies",
    "to_half_layout",
    "to_interleaved_layout",
    "alibi_slopes",
    "alibi_bias",
    "t5_relative_bucket",
    "t5_bucket_edges",
    "RelativePositionBias",
    "ALiBiBias",
]
