"""Argument checks shared by every module.

Each check raises ``TypeError`` (wrong kind of value) or ``ValueError`` (right
kind, wrong value) with a message that names the argument and says what was
expected, so a student never meets an ``IndexError`` from deep inside torch.
"""

from __future__ import annotations

import math
import numbers
import os
from collections.abc import Callable, Sequence
from typing import TypeVar

import torch

T = TypeVar("T")

FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def check_bool(name: str, value: object) -> bool:
    """``True`` or ``False`` (not 0, 1 or any other truthy value)."""
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, got {value!r}")
    return value


def _scalar(value: object) -> object:
    """A 0-d real tensor (``torch.tensor(6)``) → its Python number; anything else unchanged."""
    if (
        isinstance(value, torch.Tensor)
        and value.dim() == 0
        and value.dtype != torch.bool
        and not value.dtype.is_complex
        and value.device.type != "meta"
    ):
        return value.item()
    return value


def check_int(name: str, value: object, *, minimum: int | None = None) -> int:
    """Return ``value`` as an ``int`` (a Python or NumPy integer, or a 0-d integer tensor);
    reject bools, floats and out-of-range values."""
    value = _scalar(value)
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {value!r} ({type(value).__name__})")
    value = int(value)
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value}")
    return value


def check_positive_int(name: str, value: object) -> int:
    """An integer >= 1 (a count or a size)."""
    return check_int(name, value, minimum=1)


def check_optional(check: Callable[[str, object], T], name: str, value: object) -> T | None:
    """``None``, or ``value`` as ``check(name, value)`` returns it (e.g. an optional limit)."""
    return None if value is None else check(name, value)


def check_seed(value: object, name: str = "seed") -> int:
    """A random seed torch accepts: an integer in ``0 … 2**64 - 1``."""
    value = check_int(name, value)
    if not 0 <= value < 2**64:
        raise ValueError(f"{name} must be an integer in 0 … 2**64 - 1 (what torch.manual_seed takes), got {value}")
    return value


def check_d_model(value: object, name: str = "d_model") -> int:
    """A model (or head) width: a positive even integer, so features pair up."""
    value = check_int(name, value)
    if value <= 0 or value % 2:
        raise ValueError(f"{name} must be a positive even integer (features come in sin/cos pairs), got {value}")
    return value


def _bounds(above: float | None, minimum: float | None, below: float | None, maximum: float | None) -> str:
    parts = [f"> {above:g}"] if above is not None else []
    parts += [f">= {minimum:g}"] if minimum is not None else []
    parts += [f"< {below:g}"] if below is not None else []
    parts += [f"<= {maximum:g}"] if maximum is not None else []
    return " and ".join(parts)


def check_real(
    name: str,
    value: object,
    *,
    above: float | None = None,
    minimum: float | None = None,
    below: float | None = None,
    maximum: float | None = None,
    hint: str = "",
    what: str = "",
) -> float:
    """A finite real number as a float, ``> above``, ``>= minimum``, ``< below``, ``<= maximum`` (each optional).

    Python and NumPy numbers and 0-d tensors are accepted, bools are not. ``hint`` (a typical value) goes into the
    error; ``what`` replaces the generated description (e.g. ``"a probability in [0, 1)"``).
    """
    bounds = _bounds(above, minimum, below, maximum)
    value = _scalar(value)
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        kind = what or f"a real number {bounds}".rstrip()
        raise TypeError(f"{name} must be {kind}, got {value!r} ({type(value).__name__})")
    value = float(value)
    inside = (
        math.isfinite(value)
        and (above is None or value > above)
        and (minimum is None or value >= minimum)
        and (below is None or value < below)
        and (maximum is None or value <= maximum)
    )
    if not inside:
        expected = what or f"a finite number {bounds}".rstrip()
        raise ValueError(f"{name} must be {expected}{f' ({hint})' if hint else ''}, got {value!r}")
    return value


def check_reals(name: str, values: object, *, length: int, above: float | None = None) -> tuple[float, ...]:
    """A list, tuple or 1-D tensor of ``length`` finite real numbers (each ``> above``), as a tuple of floats."""
    items = values.tolist() if isinstance(values, torch.Tensor) else values
    if isinstance(items, (str, bytes)) or not isinstance(items, Sequence):
        raise TypeError(f"{name} must be a list of {length} numbers, got {type(values).__name__}")
    if len(items) != length:
        raise ValueError(f"{name} must be a list of {length} numbers, got {len(items)}")
    return tuple(check_real(f"{name}[{i}]", v, above=above) for i, v in enumerate(items))


def check_choice(name: str, value: object, choices: Sequence[str], *, hint: str = "") -> str:
    """One of the strings ``choices``: TypeError for a non-string, ValueError for another string."""
    options = ", ".join(map(repr, choices))
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a string, one of {options}, got {value!r} ({type(value).__name__})")
    if value not in choices:
        raise ValueError(f"{name} must be one of {options}{f' ({hint})' if hint else ''}; got {value!r}")
    return value


def check_base(value: object, name: str = "base") -> float:
    """The frequency base: a finite real number > 1 (the paper uses 10000)."""
    return check_real(name, value, above=1.0, hint="the paper uses 10000")


def check_float_dtype(value: object, name: str = "dtype") -> torch.dtype:
    """One of float16, bfloat16, float32, float64."""
    if not isinstance(value, torch.dtype):
        raise TypeError(f"{name} must be a torch.dtype, got {value!r}")
    if value not in FLOAT_DTYPES:
        raise TypeError(f"{name} must be a floating dtype (float16, bfloat16, float32 or float64), got {value}")
    return value


def check_tensor(name: str, value: object) -> torch.Tensor:
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(value).__name__}")
    return value


def check_float_tensor(name: str, value: object) -> torch.Tensor:
    value = check_tensor(name, value)
    if value.dtype not in FLOAT_DTYPES:
        raise TypeError(
            f"{name} must hold floating values (float16, bfloat16, float32 or float64), got dtype {value.dtype}"
        )
    return value


def check_embeddings(value: object, d_model: int, name: str = "x") -> torch.Tensor:
    """Token embeddings: a floating tensor of shape ``[batch, seq, d_model]``."""
    value = check_float_tensor(name, value)
    if value.dim() != 3 or value.shape[-1] != d_model:
        raise ValueError(f"{name} must have shape [batch, seq, d_model={d_model}], got {list(value.shape)}")
    return value


# ---------------------------------------------------------------------------
# Memory: refuse, before allocating, a result that cannot fit.

DEFAULT_MEMORY_LIMIT = 4 * 2**30
"""Largest single allocation (bytes) a function of the package makes without complaint."""

_memory_limit: int | None = None


def memory_limit() -> int:
    """The current limit in bytes: ``set_memory_limit``, else ``$PE_LESSONS_MAX_BYTES``, else 4 GiB."""
    if _memory_limit is not None:
        return _memory_limit
    env = os.environ.get("PE_LESSONS_MAX_BYTES")
    if env:
        try:
            value = int(float(env))
        except (ValueError, OverflowError):
            raise ValueError(f"PE_LESSONS_MAX_BYTES must be a number of bytes, got {env!r}") from None
        if value <= 0:
            raise ValueError(f"PE_LESSONS_MAX_BYTES must be a positive number of bytes, got {env!r}")
        return value
    return DEFAULT_MEMORY_LIMIT


def set_memory_limit(nbytes: int | None) -> None:
    """Set the largest allocation (in bytes) the package allows; ``None`` restores the default."""
    global _memory_limit
    if nbytes is not None:
        nbytes = check_int("nbytes", nbytes, minimum=1)
    _memory_limit = nbytes


def format_bytes(nbytes: float) -> str:
    if nbytes >= 1024**6:  # huge (a Python int may be past float's range): whole PiB, or a power of two
        pib = nbytes // 1024**5
        return f"{int(pib):,} PiB" if pib < 10**12 else f"about 2**{int(nbytes).bit_length() - 1} bytes"
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if nbytes < 1024 or unit == "PiB":
            return f"{nbytes:.0f} {unit}" if unit == "bytes" else f"{nbytes:.1f} {unit}"
        nbytes /= 1024
    raise AssertionError  # unreachable


def check_fits(
    name: str, shape: tuple[int, ...] | list[int], dtype: torch.dtype | int, *, what: str = "the result"
) -> None:
    """Raise ``ValueError`` naming ``name`` when a tensor of ``shape`` would exceed the memory limit.

    ``dtype`` is a torch dtype or a size in bytes per element. Call it *before* allocating.
    """
    itemsize = dtype if isinstance(dtype, int) else torch.empty((), dtype=dtype).element_size()
    numel = math.prod(int(s) for s in shape)
    nbytes = numel * itemsize
    limit = memory_limit()
    if nbytes > limit:
        raise ValueError(
            f"{name}: {what} would have shape {list(int(s) for s in shape)} and need {format_bytes(nbytes)}, "
            f"more than the limit of {format_bytes(limit)}; use a smaller {name}, or raise the limit "
            "with pe_lessons.set_memory_limit(nbytes) or the PE_LESSONS_MAX_BYTES environment variable"
        )


def check_device(value: object, name: str = "device") -> torch.device:
    """A device torch can use here; ``None`` means the CPU.

    A CUDA (or MPS) device on a machine or build without one is a ``ValueError`` that says so
    plainly, instead of torch's ``AssertionError: Torch not compiled with CUDA enabled``.
    The ``meta`` device is accepted (shapes only, no data).
    """
    if value is None:
        return torch.device("cpu")
    if not isinstance(value, (str, torch.device)):
        raise TypeError(f"{name} must be a str or torch.device such as 'cpu' or 'cuda', got {type(value).__name__}")
    try:
        device = torch.device(value)
    except RuntimeError as err:
        raise ValueError(f"{name} must name a device such as 'cpu' or 'cuda', got {value!r} ({err})") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        why = "this PyTorch build has no CUDA support" if torch.version.cuda is None else "no CUDA GPU is visible"
        raise ValueError(f"{name}={str(value)!r} asks for a GPU, but {why}; use device='cpu'")
    if device.type == "cuda" and device.index is not None and device.index >= torch.cuda.device_count():
        raise ValueError(f"{name}={str(value)!r}: only {torch.cuda.device_count()} CUDA device(s) are visible")
    if device.type == "mps" and not torch.backends.mps.is_available():
        raise ValueError(f"{name}={str(value)!r} asks for Apple's MPS, which is not available here; use device='cpu'")
    if device.type not in ("cpu", "cuda", "mps", "meta"):  # xpu, xla, hpu …: only if this torch has it working
        backend = getattr(torch, device.type, None)
        available = getattr(backend, "is_available", None)
        try:
            ok = bool(available()) if callable(available) else False
        except Exception:
            ok = False
        if not ok:
            raise ValueError(
                f"{name}={str(value)!r}: the {device.type!r} device type is not available in this PyTorch "
                "build or machine; use device='cpu' (or 'cuda' / 'mps' where there is one)"
            )
    return device
