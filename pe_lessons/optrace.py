"""Which tensor operations a function runs, and how many bytes each one moves.

:func:`trace_ops` records every torch call made through the Python API (a
``TorchFunctionMode``) and counts, per call, the bytes read and written as if each
kernel went to memory once: the model behind notebook 08's traffic counts and its
roofline.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch

__all__ = ["generated_code", "trace_ops"]


def _tensors(value: object) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _tensors(v)]
    return []


_ALLOCATORS = {"empty", "empty_like", "empty_strided", "new_empty"}
#: In-place ops that overwrite their target without reading it (``dst.copy_(src)`` reads only ``src``).
_OVERWRITES = {"copy_", "fill_", "zero_", "normal_", "uniform_", "random_", "bernoulli_", "exponential_"}
#: Python's augmented assignments (``x += y`` …): in place, unlike ``__invert__`` or ``__index__``.
_INPLACE_DUNDERS = {
    f"__i{op}__"
    for op in (
        "add",
        "sub",
        "mul",
        "truediv",
        "floordiv",
        "mod",
        "pow",
        "matmul",
        "and",
        "or",
        "xor",
        "lshift",
        "rshift",
    )
}


def _nbytes(tensors: Iterable[torch.Tensor]) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


class _OpRecorder(torch.overrides.TorchFunctionMode):
    def __init__(self) -> None:
        super().__init__()
        self.ops: list[dict] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        name = getattr(func, "__name__", str(func))
        inputs = _tensors(args) + _tensors({k: v for k, v in kwargs.items() if k != "out"})
        if name in _OVERWRITES and args and isinstance(args[0], torch.Tensor):
            inputs = inputs[1:]  # the target is written, not read
        if name == "__setitem__":  # t[index] = value: writes the indexed part of t
            target = args[0][args[1]]
            value = _tensors(args[2:])
            self.ops.append(
                {
                    "op": "setitem",
                    "kernel": True,
                    "read_bytes": _nbytes(value),
                    "write_bytes": target.numel() * target.element_size(),
                }
            )
            return out
        outputs = _tensors(out)
        if not outputs:
            return out
        in_place = (name.endswith("_") and not name.endswith("__")) or name in _INPLACE_DUNDERS
        if "out" in kwargs or in_place:
            kernel = True
        elif name in _ALLOCATORS:
            kernel = False  # memory is reserved, nothing is read or written
        else:  # a view shares its input's memory: no data moves
            in_ptrs = {t.untyped_storage().data_ptr() for t in inputs}
            kernel = not all(t.untyped_storage().data_ptr() in in_ptrs for t in outputs)
        self.ops.append(
            {
                "op": name.strip("_") + ("_" if in_place and not name.startswith("__") else ""),
                "kernel": kernel,
                "read_bytes": _nbytes(inputs) if kernel else 0,
                "write_bytes": _nbytes(outputs) if kernel else 0,
            }
        )
        return out


def trace_ops(fn: Callable[..., object], *args: object) -> list[dict]:
    """The tensor operations ``fn(*args)`` calls, in order, with the bytes each one moves.

    One dict per torch function call: ``op`` (its name; a trailing ``_`` marks an
    in-place op), ``kernel`` (``False`` for views, which share their input's memory,
    and for bare allocations such as ``empty``: no data moves), ``read_bytes`` (every
    input tensor read once; a broadcast operand counts at its own size, an in-place
    op reads the tensor it updates, except ops that only overwrite it, such as
    ``copy_``) and ``write_bytes`` (every output written once; ``out=`` and in-place
    targets included). In eager mode each operation with ``kernel=True`` is one
    kernel launch that reads its inputs from memory and writes its output back. Only
    calls that go through torch's Python API are seen: on a CPU, an operation on mixed dtypes
    (``bfloat16 * float32``) first converts an input into a temporary inside the call, a pass
    counted here only as the operation's own inputs and output. Where kernels run on small
    chunks that stay in cache, the count bounds the memory traffic from above.
    """
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    with _OpRecorder() as recorder:
        fn(*args)
    return recorder.ops


def generated_code(fn: Callable[..., object], *args: object) -> str:
    """The code ``torch.compile`` (its default Inductor backend) generates for ``fn(*args)``, without compiling or
    running it: the Python wrapper with each kernel's source in it (C++ on a CPU, Triton on a GPU).

    Generating is fast (about a second); compiling the C++ would take tens of seconds on a small machine. On a CPU
    the kernels come out as plain scalar loops: the probe of the CPU's vector instructions (which compiles test
    programs) is skipped, so the code shows one element at a time what the vectorized version does in SIMD
    registers — the same loads and stores. The caches of compiled graphs are bypassed, so the code is always
    generated afresh, and the compiler's state is reset before and after.
    """
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    from unittest import mock

    import torch._functorch.config as functorch_config
    import torch._inductor.config as inductor_config
    from torch._inductor import cpu_vec_isa
    from torch._inductor.utils import get_code

    torch._dynamo.reset()
    try:
        with (
            inductor_config.patch(fx_graph_cache=False),
            functorch_config.patch(enable_autograd_cache=False),
            mock.patch.object(cpu_vec_isa, "valid_vec_isa_list", lambda: []),
        ):
            sources = get_code(torch.compile(fn, dynamic=False), *args)
    finally:
        torch._dynamo.reset()
    return "\n".join(sources)
