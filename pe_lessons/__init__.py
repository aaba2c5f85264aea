"""pe_lessons: the helper package of the pe-lessons course on positional encoding.

One module per idea; the notebooks import from here and the tests check it.
"""

from .sinusoidal import (
    SinusoidalPositionalEncoding,
    inverse_frequencies,
    pe_formula,
    sinusoidal_table,
    wavelengths,
)

__version__ = "0.1.0"

__all__ = [
    "SinusoidalPositionalEncoding",
    "inverse_frequencies",
    "pe_formula",
    "sinusoidal_table",
    "wavelengths",
]
