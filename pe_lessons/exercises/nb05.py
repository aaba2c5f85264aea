"""Checkers for the exercises of notebook 05 (the linear-offset property).

The notebook uses :func:`check_concat_offset`, :func:`check_shift_by` and :func:`check_return_offset`.
:func:`check_pair_block` (one 2×2 block of ``M_k``) and :func:`check_shift` (one row product, ``PE(pos)`` and
``PE(k)`` to ``PE(pos + k)``) are kept for instructors: smaller warm-up exercises on the same ideas.
"""

from __future__ import annotations

import importlib
import math
import numbers
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, NoReturn

import torch
from torch.overrides import TorchFunctionMode

from ..offsets import offset_blocks, offset_matrix, offset_similarity
from . import _feedback
from ._feedback import (
    Feedback,
    as_integer,
    as_values,
    checker,
    describe_error,
    failed,
    is_placeholder,
    not_done,
    passed,
    precision,
    time_limit,
)

__all__ = ["check_pair_block", "check_concat_offset", "check_shift", "check_shift_by", "check_return_offset"]


def _as_matrix(answer: object) -> torch.Tensor | None:
    """The answer as a float64 CPU tensor, or None if it is not an array of real numbers."""
    if isinstance(answer, (str, bytes)):
        return None
    try:
        if isinstance(answer, torch.Tensor):
            if answer.is_complex() or answer.device.type == "meta":
                return None
            answer = answer.detach().cpu()
        if not isinstance(answer, torch.Tensor) and type(answer).__module__.split(".")[0] != "numpy":
            answer = torch.as_tensor(answer, dtype=torch.float64)  # a Python list: keep its float64 values
        m = torch.as_tensor(answer)
        if m.is_complex() or m.dtype == torch.bool:
            return None
        m = m.to(torch.float64)
    except Exception:  # nested lists of text, ragged lists, objects, huge ints …
        return None
    return m


def _same(a: torch.Tensor, b: torch.Tensor, tol: float = 1e-6) -> bool:
    return a.shape == b.shape and bool((a - b).abs().max() <= tol)


@checker
def check_pair_block(answer: object, k: int = 3, i: int = 1, d_model: int = 8, base: float = 10000.0) -> Feedback:
    """Check the 2×2 block of ``M_k`` for pair ``i``: it maps ``(sin a, cos a)`` to ``(sin(a+b), cos(a+b))``, ``b = k·ω_i``."""
    if is_placeholder(answer):
        return not_done()
    m = _as_matrix(answer)
    if m is None or m.shape != (2, 2):
        shape = list(m.shape) if m is not None else type(answer).__name__
        return failed(f"Answer with a 2×2 matrix (a list of two rows of two real numbers), got {shape}.")
    if not bool(torch.isfinite(m).all()):
        return failed(
            f"Your matrix holds NaN or inf ({m.tolist()}): every entry of a rotation is a cos or sin, in [−1, 1]."
        )
    omega = base ** (-2 * i / d_model)
    b = k * omega
    want = offset_blocks(k, d_model, base)[i]
    if _same(m, want):
        return passed(
            f"That is block {i} of M_{k}: a rotation by b = k·ω_{i} = {b:.4f} rad, with cos b on the diagonal."
        )
    if _same(m, want.T):
        return failed(
            "This is the transpose, i.e. the block of M_(−k): it moves backwards. Read the first row off "
            "sin(a+b) = sin a·cos b + cos a·sin b: it is (cos b, sin b), acting on (sin a, cos a)."
        )
    c, s = m[0, 0].item(), m[0, 1].item()
    rotation_form = _same(m, torch.tensor([[c, s], [-s, c]], dtype=torch.float64))
    if _same(m, torch.tensor([[c, s], [s, c]], dtype=torch.float64)) or _same(
        m, torch.tensor([[c, -s], [-s, c]], dtype=torch.float64)
    ):
        if abs(s) > 1e-6:
            return failed(
                "A sign is wrong: the two off-diagonal entries must be opposite (+sin b above, −sin b below), "
                "from cos(a+b) = cos a·cos b − sin a·sin b."
            )
    if _same(m, torch.tensor([[math.sin(b), math.cos(b)], [-math.cos(b), math.sin(b)]], dtype=torch.float64)):
        return failed(
            "sin and cos are swapped: cos b belongs on the diagonal (at b = 0 the block must be the identity)."
        )
    if rotation_form and abs(c * c + s * s - 1) < 1e-6:
        got = math.atan2(s, c)
        candidates = {
            "degrees": [math.radians(b), math.degrees(b)],
            "no k": [omega],
            "column index": [k * base ** (-2 * (2 * i) / d_model)],
            "pair 0": [float(k)],
            "exponent i/d": [k * base ** (-i / d_model)],
        }
        for name, angles in candidates.items():
            if any(abs(math.remainder(got - ang, 2 * math.pi)) < 1e-6 for ang in angles):
                return failed(
                    {
                        "degrees": "The angle looks converted between degrees and radians: math.cos and torch.cos work in "
                        f"radians, and b = k·ω_{i} = {b:.4f} is already in radians.",
                        "no k": f"You rotated by ω_{i} = {omega:.4f}, one position's worth: the offset is k = {k}, so b = k·ω_{i}.",
                        "column index": f"The frequency uses the column index 2i = {2 * i} in place of the pair index i = {i}: "
                        f"ω_i = base^(−2i/d_model).",
                        "pair 0": f"You rotated by k = {k} rad, the angle of pair 0 (ω_0 = 1); pair {i} turns by k·ω_{i}.",
                        "exponent i/d": "The exponent is i/d_model; the paper's is 2i/d_model.",
                    }[name]
                )
        return failed(
            f"The form is right (a rotation) but the angle is {got:.4f} rad; it should be b = k·ω_{i} = {b:.4f}."
        )
    return failed(
        f"Expected [[cos b, sin b], [−sin b, cos b]] with b = k·ω_{i} = {b:.4f}; "
        f"your top-left entry is {c:.4f} (cos b = {math.cos(b):.4f})."
    )


# ----------------------------------------------------------------------------- what a student function may not call


class _Refused(BaseException):
    """The student's function called an operation the exercise forbids.

    A ``BaseException``, so a student's ``except Exception:`` does not swallow it (and the guard
    remembers the first refusal anyway)."""

    def __init__(self, label: str, kind: str) -> None:
        super().__init__(label)
        self.label, self.kind = label, kind


class _TooMuchWork(BaseException):
    """The student's function ran more torch operations, or built a larger tensor, than allowed."""

    def __init__(self, what: str, amount: int) -> None:
        super().__init__(what)
        self.what, self.amount = what, amount


#: sin and cos themselves, and their hyperbolic cousins (cosh(ix) = cos x).
_TRIG = frozenset({"sin", "cos", "tan", "sinc", "sinh", "cosh", "tanh"})
#: Ways back to the angle itself, or through it: inverse trig, complex exp/log, angle, polar.
_ANGLE = frozenset(
    {
        *("asin", "acos", "atan", "atan2", "arcsin", "arccos", "arctan", "arctan2"),
        *("asinh", "acosh", "atanh", "arcsinh", "arccosh", "arctanh", "angle", "polar", "phase", "rect"),
        *("exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "logaddexp", "logaddexp2", "matrix_exp"),
    }
)
#: Least squares and the solvers and factorizations a fit can be built from.
_SOLVERS = frozenset(
    {
        *("lstsq", "solve", "solve_ex", "solve_triangular", "triangular_solve", "cholesky_solve", "lu_solve"),
        *("inv", "inv_ex", "inverse", "pinv", "pinverse", "tensorsolve", "tensorinv", "cholesky", "cholesky_ex"),
        *("cholesky_inverse", "lu", "lu_factor", "lu_factor_ex", "qr", "svd", "svdvals", "eig", "eigh"),
        *("eigvals", "eigvalsh", "ldl_factor", "ldl_factor_ex", "ldl_solve", "lu_unpack", "geqrf", "ormqr"),
        *("householder_product", "best_linear_map"),
    }
)
#: Ways to take the numbers out of torch (where the guard could no longer see or count the work).
_LEAVE = frozenset({"tolist", "item", "numpy", "__float__", "__complex__", "__array__", "__int__", "__index__"})
_POW = frozenset({"pow", "rpow", "ipow", "float_power"})
_QUIET = frozenset({"repr", "str", "format"})  # printing a tensor while debugging is fine, and not counted


def _op_name(func: object) -> str:
    """The plain name of a torch function or method: ``x.sin_`` → ``sin``, ``torch.linalg.lstsq`` → ``lstsq``,
    ``Tensor.__rpow__`` → ``rpow``, ``torch.ops.aten.sin.default`` → ``sin``."""
    name = str(getattr(func, "__name__", "") or "").split(".")[0].strip("_")
    for prefix in ("linalg_", "special_"):
        if name.startswith(prefix):
            name = name[len(prefix) :]
    return name


def _label(func: object) -> str:
    """How the student wrote the call: ``x.sin_``, ``torch.atan2``, ``torch.linalg.lstsq`` …"""
    name = str(getattr(func, "__name__", "") or "?")
    if getattr(torch.Tensor, name, None) is func:
        return f"x.{name}"
    if name.startswith("linalg_"):
        return f"torch.linalg.{name[len('linalg_') :]}"
    if name.startswith("special_"):
        return f"torch.special.{name[len('special_') :]}"
    if "." in name:  # torch.ops.aten.<op>.<overload>
        return f"torch.ops.aten.{name}"
    return f"torch.{name}"


def _is_complex(value: object) -> bool:
    return (isinstance(value, torch.Tensor) and value.is_complex()) or isinstance(value, complex)


class _Guard(TorchFunctionMode):
    """Sees every torch function, method, in-place variant and operator the student's code calls: refuses the
    names in ``refused`` (and powers of complex numbers), counts the calls, and stops the code past ``budget``
    calls or when it builds a tensor of more than ``max_numel`` numbers."""

    def __init__(self, refused: dict[str, str], budget: int | None = None, max_numel: int | None = None) -> None:
        super().__init__()
        self.refused, self.budget, self.max_numel = refused, budget, max_numel
        self.calls = 0
        self.refusal: _Refused | None = None
        self.watch_leave = False  # record what leaves torch (tolist, item, numpy …): allowed only as the last step
        self.left: list[tuple[str, torch.Tensor | None]] = []

    def refuse(self, label: str, kind: str) -> NoReturn:
        self.refusal = self.refusal or _Refused(label, kind)
        raise _Refused(label, kind)

    def __torch_function__(
        self,
        func: Callable[..., Any],
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        raw, name = str(getattr(func, "__name__", "")), _op_name(func)
        if name in _QUIET:
            return func(*args, **kwargs)
        if self.watch_leave and raw in _LEAVE:
            first = args[0] if args else None
            values = None
            if isinstance(first, torch.Tensor) and not first.is_complex():
                values = first.detach().reshape(-1).to(torch.float64).clone()
            self.left.append((_label(func), values))
            return func(*args, **kwargs)
        if raw in self.refused or name in self.refused:
            self.refuse(_label(func), self.refused.get(raw) or self.refused[name])
        if name in _POW and "complex_pow" in self.refused.values():
            if any(_is_complex(a) for a in (*args, *kwargs.values())):
                self.refuse(_label(func) + " of a complex number", "complex_pow")
        self.calls += 1
        if self.budget is not None and self.calls > self.budget:
            raise _TooMuchWork("calls", self.calls)
        out = func(*args, **kwargs)
        if self.max_numel is not None and isinstance(out, torch.Tensor) and out.numel() > self.max_numel:
            raise _TooMuchWork("numel", out.numel())
        return out


#: Functions of math, cmath and numpy (and scipy.linalg, when it is loaded) that a guard replaces, by kind.
_MODULE_NAMES = {
    "trig": {
        "math": ("sin", "cos", "tan", "sinh", "cosh", "tanh"),
        "cmath": ("sin", "cos", "tan", "sinh", "cosh", "tanh"),
        "numpy": ("sin", "cos", "tan", "sinh", "cosh", "tanh", "sinc"),
    },
    "angle": {
        "math": ("asin", "acos", "atan", "atan2"),  # math.exp and math.log of a real number are harmless
        "cmath": ("asin", "acos", "atan", "exp", "log", "log10", "phase", "polar", "rect"),
        "numpy": ("arcsin", "arccos", "arctan", "arctan2", "angle", "exp", "log"),
    },
    "solver": {
        "numpy.linalg": (
            *("lstsq", "solve", "inv", "pinv", "tensorsolve", "tensorinv", "svd", "qr", "eig", "eigh", "cholesky"),
        ),
        "scipy.linalg": (
            *("lstsq", "solve", "inv", "pinv", "svd", "qr", "lu", "lu_factor", "lu_solve", "cho_factor", "cho_solve"),
            *("cholesky", "ldl", "solve_triangular", "solve_banded", "solveh_banded"),
        ),
    },
}


@contextmanager
def _guarded(
    kinds: tuple[str, ...],
    budget: int | None = None,
    max_numel: int | None = None,
    fn: Callable[..., object] | None = None,
) -> Iterator[_Guard]:
    """Run the block under a :class:`_Guard` that refuses the torch operations of ``kinds`` ("trig", "angle",
    "solver", "leave", "matrix_power", "complex_pow"), with the same functions of math/cmath/numpy (and
    scipy.linalg, if loaded) replaced by ones that raise; everything is restored afterwards.

    A function is replaced wherever the student's code could reach it by a name bound earlier, not only as
    ``numpy.linalg.lstsq``: every attribute of the loaded math/cmath/numpy/scipy modules that *is* the refused
    function (``numpy.linalg._linalg.lstsq`` …), and, for the student's function ``fn``, its globals (``from
    numpy.linalg import lstsq`` in the notebook, helpers defined beside it), its closure cells and its defaults."""
    import sys

    names = {"trig": _TRIG, "angle": _ANGLE, "solver": _SOLVERS}
    refused = {name: kind for kind in kinds for name in names.get(kind, ())}
    if "matrix_power" in kinds:
        refused["matrix_power"] = "matrix_power"
    if "complex_pow" in kinds:
        refused["__complex_pow__"] = "complex_pow"  # a marker: powers of complex tensors are refused
    guard = _Guard(refused, budget, max_numel)
    guard.watch_leave = "leave" in kinds

    def refusing(label: str, kind: str) -> Callable[..., object]:
        def call(*args: object, **kwargs: object) -> object:
            guard.refuse(label, kind)

        return call

    refused_functions: dict[int, Callable[..., object]] = {}  # id(original) -> its refusing stand-in
    saved: list[tuple[object, str, object]] = []
    for kind in kinds:
        for module_name, attrs in _MODULE_NAMES.get(kind, {}).items():
            module: Any = sys.modules.get(module_name)
            if module is None and module_name in ("math", "cmath", "numpy", "numpy.linalg"):
                module = importlib.import_module(module_name)
            for attr in attrs:
                original = getattr(module, attr, None) if module is not None else None
                if original is not None and id(original) not in refused_functions:
                    label = f"{getattr(module, '__name__', '?')}.{attr}"
                    refused_functions[id(original)] = refusing(label, _kind_of(attr, kinds))
    if refused_functions:  # every module attribute that is a refused function (aliases such as numpy.linalg._linalg)
        for module_name, module in list(sys.modules.items()):
            if module is None or module_name.split(".")[0] not in ("math", "cmath", "numpy", "scipy"):
                continue
            for attr, value in list(getattr(module, "__dict__", {}).items()):
                if id(value) in refused_functions:
                    saved.append((module, attr, value))
    namespaces: list[tuple[dict[str, Any], str, object]] = []  # the student's globals: names bound before the call
    cells: list[tuple[Any, object]] = []
    defaults: tuple[object, ...] | None = None
    if fn is not None and refused_functions:
        for name, value in list(getattr(fn, "__globals__", {}).items()):
            if id(value) in refused_functions:
                namespaces.append((fn.__globals__, name, value))  # type: ignore[attr-defined]
        for cell in getattr(fn, "__closure__", None) or ():
            try:
                if id(cell.cell_contents) in refused_functions:
                    cells.append((cell, cell.cell_contents))
            except ValueError:  # an empty cell
                continue
        defaults = getattr(fn, "__defaults__", None)
    try:
        for module, attr, original in saved:
            setattr(module, attr, refused_functions[id(original)])
        for namespace, name, original in namespaces:
            namespace[name] = refused_functions[id(original)]
        for cell, original in cells:
            cell.cell_contents = refused_functions[id(original)]
        if defaults:
            fn.__defaults__ = tuple(refused_functions.get(id(v), v) for v in defaults)  # type: ignore[union-attr]
        with guard:
            yield guard
    finally:
        for module, attr, original in saved:
            setattr(module, attr, original)
        for namespace, name, original in namespaces:
            if namespace.get(name) is refused_functions[id(original)]:  # unless the student's code rebound it
                namespace[name] = original
        for cell, original in cells:
            cell.cell_contents = original
        if defaults:
            fn.__defaults__ = defaults  # type: ignore[union-attr]


def _kind_of(attr: str, kinds: tuple[str, ...]) -> str:
    for kind in kinds:
        if any(attr in attrs for attrs in _MODULE_NAMES.get(kind, {}).values()):
            return kind
    return kinds[0]


def _refusal_message(refusal: _Refused) -> str:
    """What to tell a student whose function called a forbidden operation (never the answer)."""
    called = refusal.label
    if refusal.kind == "trig":
        return (
            f"Your function calls {called}. It does not need to: the rows you are given already hold the sine and "
            "the cosine of every pair's angle (column 2i and column 2i + 1)."
        )
    if refusal.kind == "angle":
        return (
            f"Your function calls {called}: it goes back to the angles (or through them), which is sin and cos in "
            "disguise. Stay with the stored numbers: angle addition needs only products and sums of the sines and "
            "cosines of each pair."
        )
    if refusal.kind == "complex_pow":
        return (
            f"Your function calls {called}: a complex power goes through exp and log, i.e. through the angle. "
            "Reach the power with products instead."
        )
    if refusal.kind == "matrix_power":
        return (
            f"Your function calls {called}, which does the repeated multiplication for you: the exercise is to "
            "work out which products to take, on the rows themselves."
        )
    if refusal.kind == "leave":
        return (
            f"Your function calls {called} and goes on computing outside torch, where the checker can neither see "
            "your products nor count them. Work on the tensors you are given (indexing, slicing, `*`, `+`, "
            "`torch.stack`, `torch.cat` …); converting the finished row (`row.tolist()`) is fine."
        )
    if called.startswith("torch.linalg.lstsq"):
        called += " (best_linear_map calls it too)"
    if refusal.label.rsplit(".", 1)[-1] in ("inv", "inv_ex", "inverse", "pinv", "pinverse"):
        return (
            f"Your function calls {called}: the checker refuses inverses and solvers here, so that the matrix is "
            "derived, not fitted from data. If you are inverting a permutation (or a rotation), you do not need "
            "to: its inverse is its transpose."
        )
    return (
        f"Your function calls {called}: that fits (or solves for) the matrix from data. The exercise asks you to "
        "derive it: write down where each pair's entries go, from the angle-addition identities of §1."
    )


# ----------------------------------------------------------------------------- rows of the table and their slips


def _rows(positions: object, d_model: int, base: float = 10000.0) -> torch.Tensor:
    """Float64 rows ``PE(pos)`` for each pos (any integers, large ones too), straight from the formula."""
    pos = torch.as_tensor(positions, dtype=torch.float64).reshape(-1, 1)
    omega = base ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    angles = pos * omega
    return torch.stack((angles.sin(), angles.cos()), -1).reshape(pos.shape[0], d_model)


def _combine(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """The row of angle a + b from the rows of a and b (angle addition, pair by pair)."""
    sa, ca, sb, cb = p[0::2], p[1::2], q[0::2], q[1::2]
    return torch.stack((sa * cb + ca * sb, ca * cb - sa * sb), -1).reshape(-1)


def _pair_swap(d_model: int) -> torch.Tensor:
    return torch.arange(d_model).view(-1, 2).flip(-1).reshape(-1)


def _combine_slip(got: torch.Tensor, p: torch.Tensor, q: torch.Tensor, tol: float, float32_ok: bool = True) -> str:
    """Name the slip in a row product ``got`` of the rows ``p`` (PE(pos)) and ``q`` (PE(k)): a hint, not the answer."""
    d_model = p.numel()
    want = _combine(p, q)
    swap = _pair_swap(d_model)
    sa, ca, sb, cb = p[0::2], p[1::2], q[0::2], q[1::2]
    sin_ok, cos_ok = _same(got[0::2], want[0::2], tol), _same(got[1::2], want[1::2], tol)
    err = float((got - want).abs().max())
    if err < 1e-3:
        allowed = (
            "a float64 row must agree to 1e-9 and a float32 row to 1e-6" if float32_ok else "it must agree to 1e-9"
        )
        return (
            f"your row is close but not exact: off by {err:.0e} at most, where {allowed}. Was it computed (or "
            "rounded) in a lower precision somewhere?"
        )
    if _same(got, q, tol) and not _same(p, q, tol):
        return "your row is PE(k) itself: it does not depend on pe_pos. The result must start from PE(pos)."
    if _same(got, p, tol):
        return "your row is PE(pos) unchanged: nothing was added."
    if _same(got, p + q, tol):
        return (
            "you added the rows. Adding encodings does not add positions: PE(pos) + PE(k) is not PE(pos + k). "
            "Rotate each pair of PE(pos) by the angle stored in the same pair of PE(k)."
        )
    if _same(got, p * q, tol):
        return (
            "you multiplied the rows entry by entry; each new entry needs both the sine and the cosine of its pair "
            "(angle addition, §1)."
        )
    if _same(got, _combine(p, q * torch.tensor([-1.0, 1.0], dtype=q.dtype).repeat(d_model // 2)), tol):
        return "you got PE(pos − k): the two products with sin b have the wrong sign (that is M_kᵀ = M_(−k))."
    if _same(got[swap], want, tol):
        return (
            "sin and cos are swapped in your result: column 2i is the sine of the new angle, column 2i + 1 its cosine."
        )
    if _same(got, _combine(p, q[swap]), tol):
        return (
            "you read PE(k)'s pairs the wrong way round: in each pair, column 2i holds the sine and column 2i + 1 "
            "the cosine."
        )
    if _same(got, _combine(p[swap], q), tol):
        return (
            "you read PE(pos)'s pairs the wrong way round: in each pair, column 2i holds the sine and column 2i + 1 "
            "the cosine."
        )
    if sin_ok and _same(got[1::2], ca * cb - want[0::2] * sb, tol):
        return (
            "the sin columns (even) are right, but the cos columns were computed from the new sines: you overwrote "
            "the sines of pe_pos (an in-place write into a view) before the cos columns read them. Read every old "
            "value before writing, or write into a new tensor."
        )
    if cos_ok and _same(got[0::2], sa * cb + want[1::2] * sb, tol):
        return (
            "the cos columns (odd) are right, but the sin columns were computed from the new cosines: you overwrote "
            "the cosines of pe_pos (an in-place write into a view) before the sin columns read them. Read every old "
            "value before writing, or write into a new tensor."
        )
    if sin_ok and _same(got[1::2], ca * cb + sa * sb, tol):
        return (
            "the sin columns (even) are right; the cos columns hold cos(a − b), not cos(a + b): check the sign of "
            "the second product in the identity for cos(a + b)."
        )
    if cos_ok and _same(got[0::2], sa * cb - ca * sb, tol):
        return (
            "the cos columns (odd) are right; the sin columns hold sin(a − b), not sin(a + b): check the sign of "
            "the second product in the identity for sin(a + b)."
        )
    if sin_ok:
        j = 2 * int((got[1::2] - want[1::2]).abs().argmax()) + 1
        return (
            f"the sin columns (even) are right; the cos columns (odd) are wrong (column {j} first): check cos(a + b)."
        )
    if cos_ok:
        j = 2 * int((got[0::2] - want[0::2]).abs().argmax())
        return (
            f"the cos columns (odd) are right; the sin columns (even) are wrong (column {j} first): check sin(a + b)."
        )
    j = int((got - want).abs().argmax())
    return (
        f"both the sin columns and the cos columns are wrong (column {j} first). Derive one pair on paper: "
        "which two stored numbers of each row does sin(a + b) need, and which does cos(a + b)?"
    )


def _row_answer(got: object, d_model: int, label: str) -> tuple[torch.Tensor | None, float, Feedback | None]:
    """The returned row as a float64 vector and the tolerance its dtype allows (float64: 1e-9, float32: 1e-6),
    or feedback: not a row, wrong length, NaN/inf, or a half-precision row (3 or 4 significant digits)."""
    dtype = getattr(got, "dtype", None)
    if dtype in (torch.float16, torch.bfloat16) or str(dtype) == "float16":
        digits = 3 if dtype == torch.bfloat16 else 4
        return (
            None,
            0.0,
            failed(
                f"{label} returned a {str(dtype).replace('torch.', '')} row ({digits} significant digits): the rows you "
                "are given are float64; return float64 (or float32 at least)."
            ),
        )
    row, problem = as_values(got, f"a row of {d_model} real numbers (a tensor, an array or a list)")
    if problem is not None or row is None:
        return (
            None,
            0.0,
            (problem if problem is not None else failed(f"{label} must return a row of {d_model} real numbers.")),
        )
    row = row.reshape(-1)
    if row.numel() != d_model:
        return (
            None,
            0.0,
            failed(
                f"With rows of d_model = {d_model}, {label} returned {row.numel()} numbers: it must work for any even "
                "width (take the sizes from the rows you are given)."
            ),
        )
    if not bool(torch.isfinite(row).all()):
        return None, 0.0, failed(f"{label} returned NaN or inf; a row of the table holds sines and cosines.")
    return row, (1e-9 if precision(got) <= 2.0**-52 else 1e-6), None


# ----------------------------------------------------------------------------- one row product: my_shift


@checker
def check_shift(
    my_shift: Callable[[torch.Tensor, torch.Tensor], object] | None, d_models: tuple[int, ...] = (8, 2, 12, 6)
) -> Feedback:
    """Check ``my_shift(pe_pos, pe_k) -> PE(pos + k)`` on several (pos, k) and widths, without sin or cos.

    ``pe_pos`` and ``pe_k`` are float64 rows of the table. While ``my_shift`` runs, a
    :class:`~torch.overrides.TorchFunctionMode` refuses sin and cos and every way back to the angle
    (``atan2``, ``angle``, ``exp``, ``log``, ``polar`` …) as functions, methods, in-place variants and
    operators, and the same functions of math, cmath and numpy raise. A float64 (or list) row is
    compared to 1e-9, a float32 row to 1e-6; a half-precision row is refused.
    """
    if is_placeholder(my_shift):
        return not_done()
    if not callable(my_shift):
        return failed(f"my_shift must be a function (pe_pos, pe_k) -> row; got {type(my_shift).__name__}.")
    for d_model in d_models:
        table = _rows(range(200), d_model)
        for pos, k in ((5, 3), (17, 40), (0, 9), (120, 1), (33, 33)):
            label = f"my_shift(PE({pos}), PE({k})) at d_model = {d_model}"
            got, problem, _ = _run_guarded(label, my_shift, ("trig", "angle"), table[pos].clone(), table[k].clone())
            if problem is not None:
                return problem
            row, tol, problem = _row_answer(got, d_model, "my_shift")
            if problem is not None or row is None:
                return problem if problem is not None else failed("my_shift returned no row.")
            if _same(row, table[pos + k], tol):
                continue
            return failed(
                f"For pos = {pos}, k = {k}, d_model = {d_model}: " + _combine_slip(row, table[pos], table[k], tol)
            )
    return passed(
        f"my_shift gives PE(pos + k) for 5 (pos, k) at each of {len(d_models)} widths (d_model = "
        f"{', '.join(map(str, d_models))}), using only products and sums of PE(pos) and PE(k)."
    )


def _run_guarded(
    label: str,
    fn: Callable[..., object],
    kinds: tuple[str, ...],
    *args: object,
    budget: int | None = None,
    max_numel: int | None = None,
) -> tuple[object, Feedback | None, int]:
    """``(result, None, calls)`` or ``(None, feedback, 0)``: run the student's function under a guard and a time
    limit; ``calls`` is the number of torch operations it ran."""
    guard: _Guard | None = None
    try:
        with _guarded(kinds, budget, max_numel, fn) as guard, time_limit(_feedback.TIME_LIMIT):
            result = fn(*args)
    except _Refused as refusal:
        return None, failed(_refusal_message(refusal)), 0
    except _TooMuchWork:
        raise
    except _feedback.TimeLimitExceeded as err:
        return None, _feedback.too_slow(label, err.seconds), 0
    except (Exception, SystemExit) as err:  # show the student their own error, briefly
        if guard is not None and guard.refusal is not None:
            return None, failed(_refusal_message(guard.refusal)), 0
        return None, describe_error(label, err), 0
    if guard is not None and guard.refusal is not None:  # refused, and the student's code swallowed it
        return None, failed(_refusal_message(guard.refusal)), 0
    if guard is not None and guard.left and not _only_converted(guard.left, result):
        return None, failed(_refusal_message(_Refused(guard.left[0][0], "leave"))), 0
    return result, None, guard.calls if guard is not None else 0


def _only_converted(left: list[tuple[str, torch.Tensor | None]], result: object) -> bool:
    """Whether what left torch is exactly the result: a last conversion (``row.tolist()``, ``row.numpy()``,
    ``[x.item() for x in row]``), not a computation continued outside torch."""
    if any(values is None for _, values in left):
        return False
    gone = torch.cat([values for _, values in left if values is not None])
    returned, problem = as_values(result)
    return problem is None and returned is not None and torch.equal(gone, returned.reshape(-1))


# ----------------------------------------------------------------------------- many row products: my_shift_by


_K_TINY, _K_SMALL, _K_LARGE = 31, 1023, 2**20 - 1  # 5, 10 and 20 binary digits, all ones
_OTHER_BASE = 500.0  # one probe's rows have another base: the frequencies must be read from pe_1


def _reached(row: torch.Tensor, pos: int, k: int, d_model: int, tol: float, base: float = 10000.0) -> str:
    """Where a wrong row of ``my_shift_by(PE(pos), PE(1), k)`` landed, as a hint (never the algorithm)."""
    span = torch.arange(-k - 2, 2 * k + 3)
    near = _rows(pos + span, d_model, base)
    hits = ((near - row).abs().amax(dim=1) <= tol).nonzero().flatten()
    if hits.numel():
        j = int(span[hits[0]])
        at = f"your row is PE(pos + {j}), not PE(pos + {k})"
        if j == 0:
            return f"{at}: it is PE(pos) itself, nothing was added."
        if j == -k:
            return f"{at}: you moved backwards — a sign slip in your row product."
        digits = (
            f"{j} is the number of 1-digits in k = {k} (binary {k:b}): did each 1-digit add one step, PE(1), "
            "instead of the power of two it stands for?"
        )
        if abs(j - k) == 1:
            if j == bin(k).count("1") and k > 1:  # k = 1 passed, so a loop one short is the less likely slip
                return f"{at}: {digits} Or, one step off: check where your loop starts and stops."
            hint = f"{at}, one step off: check where your loop starts and stops, and what each product adds"
            return hint + (" (k = 1 must take one product)." if k == 1 else ".")
        if j == bin(k).count("1"):
            return f"{at}: {digits}"
        if j > 0 and j & (j - 1) == 0 and j < k:
            return (
                f"{at}: {j} is the largest power of two in k = {k} (binary {k:b}); the other 1-digits of k "
                "need their rows too."
            )
        return f"{at}: trace your loop by hand for k = {k} (binary {k:b})."
    alone = _rows(span.clamp(min=0), d_model, base)
    if bool(((alone - row).abs().amax(dim=1) <= tol).any()):
        return f"your row does not depend on pe_pos: the result must start from PE(pos) (here pos = {pos})."
    norms = (row[0::2] ** 2 + row[1::2] ** 2).sqrt()
    if bool(((norms - 1).abs() > 1e-6).any()):
        return (
            f"your row is not a row of the table: pair {int((norms - 1).abs().argmax())} has length "
            f"{float(norms[(norms - 1).abs().argmax()]):.4f}, and every pair of a row has sin² + cos² = 1. "
            "A product of two rows keeps that; a sum of two rows does not."
        )
    return (
        f"your pairs are not all turned by the same offset: each pair i of PE(pos + k) has the angle (pos + k)·ω_i. "
        f"Trace your loop by hand for k = {k} (binary {k:b})."
    )


def _shift_by_case(
    my_shift_by: Callable[..., object],
    d_model: int,
    pos: int,
    k: int,
    budget: int | None = None,
    base: float = 10000.0,
    counts: tuple[int, int] = (0, 0),
) -> tuple[int, Feedback | None]:
    """``(torch operations counted, None)`` when ``my_shift_by`` reaches PE(pos + k), else ``(0, feedback)``;
    ``counts`` are the operations counted for k = 31 and 1023 (for the message when ``budget`` stops the run)."""
    pe = _rows([pos, 1], d_model, base)
    at_base = "" if base == 10000.0 else f", base = {base:g}"
    label = f"my_shift_by(PE({pos}), PE(1), {k}) at d_model = {d_model}{at_base}"
    max_numel = max(4 * d_model * d_model, 1024)
    try:
        got, problem, calls = _run_guarded(
            label,
            my_shift_by,
            ("trig", "angle", "leave", "matrix_power", "complex_pow"),
            pe[0].clone(),
            pe[1].clone(),
            k,
            budget=budget,
            max_numel=max_numel,
        )
    except _TooMuchWork as stop:
        if stop.what == "numel":
            return 0, failed(
                f"{label} built a tensor of {stop.amount:,} numbers: work that grows with k. "
                "Keep to rows (and a few rows of products): the offsets you can reach grow much faster than the "
                "number of products you take."
            )
        return 0, failed(
            f"For k = {_K_TINY} and k = {_K_SMALL} your function ran {counts[0]:,} and {counts[1]:,} torch "
            f"operations; for k = {k:,} it ran more than {budget:,} and was stopped: its work grows like k (or √k), "
            "not like log k. Recall §3(c), M_a M_b = M_(a+b): from the rows you already have, which offsets can one "
            "row product reach?"
        )
    if problem is not None:
        return 0, problem
    dtype = getattr(got, "dtype", None)
    if dtype in (torch.float32, torch.float16, torch.bfloat16) or str(dtype) in ("float32", "float16"):
        return 0, failed(
            f"{label} returned a {str(dtype).replace('torch.', '')} row: the rows you get are float64, and every "
            "product's rounding is carried into the next; keep float64 throughout."
        )
    row, _, problem = _row_answer(got, d_model, "my_shift_by")
    if problem is not None or row is None:
        return 0, problem if problem is not None else failed("my_shift_by returned no row.")
    want = _rows([pos + k], d_model, base)[0]
    tol = 1e-9 + 1e-14 * k  # the rounding of PE(1), carried k times, is about 1e-16·k
    if _same(row, want, tol):
        return calls, None
    where = f"For pos = {pos}, k = {k}, d_model = {d_model}{at_base}: "
    if base != 10000.0 and _same(row, _combine(pe[0], _rows([k], d_model)[0]), tol):
        return 0, failed(
            where + f"these rows were built with base {base:g}, but your row turns each pair by "
            "k·10000^(−2i/d_model), the step of base 10000. How far each pair turns per position is stored in "
            "pe_1 (as its sine and cosine): take it from there, not from the formula."
        )
    if k == 0:
        return 0, failed(where + "k = 0 must give PE(pos) back unchanged.")
    squared, pe_k = pe[0], _rows([k], d_model, base)[0]
    for times in range(1, 41):  # a digit loop that squares pe_pos along with the powers of PE(1): PE(2^t·pos + k)
        squared = _combine(squared, squared)  # (doubled as a loop doubles it: its rounding grows like 2^t)
        if _same(row, _combine(squared, pe_k), tol + 2.0**times * 1e-15):
            return 0, failed(
                where + f"your row is PE({2**times}·pos + {k}): pe_pos was squared along with the powers of PE(1) "
                f"({times} squaring{'s' if times > 1 else ''} for k = {k}, binary {k:b}). Your row product is right; "
                "square only the rows built from PE(1), and multiply PE(pos) in once."
            )
    if k == 1:
        if any(_same(row, _rows([pos + j], d_model, base)[0], tol) for j in (0, 2, 3)):  # a loop bound, not the product
            return 0, failed(where + _reached(row, pos, k, d_model, tol, base))
        slip = _combine_slip(row, pe[0], pe[1], tol, float32_ok=False)
        return 0, failed(where + "(one row product of PE(pos) and PE(1)) " + slip)
    return 0, failed(where + _reached(row, pos, k, d_model, tol, base))


@checker
def check_shift_by(my_shift_by: Callable[..., object] | None, d_models: tuple[int, ...] = (8, 2, 12, 64)) -> Feedback:
    """Check ``my_shift_by(pe_pos, pe_1, k) -> PE(pos + k)`` for ``k ≥ 0``: no sin or cos, and a number of
    torch operations that grows like ``log k``.

    Probed at several widths and offsets up to ``2**20 − 1``, and at one width with rows of another base
    (500), so frequencies computed from the formula instead of read from ``pe_1`` fail. While the function
    runs, a :class:`~torch.overrides.TorchFunctionMode` refuses sin, cos and the ways back to the angle
    (functions, methods, in-place variants, operators; complex powers; ``matrix_power``) and the ways out
    of torch (``tolist``, ``item``, ``numpy``, ``float`` …, where its work could not be counted), and
    counts every torch call. The work is judged by its *growth*, so that a fixed set-up (building ``M_1``
    from ``pe_1``, say) does not hide it: with ``c(n)`` the calls for ``k = 2**n − 1`` (n binary digits,
    all ones), a log-k solution has ``c(20) − c(10) ≈ 2 (c(10) − c(5))``. The run at ``k = 2**20 − 1`` is
    stopped past ``c(10) + 4 (c(10) − c(5))`` calls (a loop of ``k`` products needs ~1000×, of ``√k``
    ~30×), and a count that does not grow with ``k`` (ratio below 1.5) fails too. The function may not
    build a tensor that grows with ``k`` either.
    """
    if is_placeholder(my_shift_by):
        return not_done()
    if not callable(my_shift_by):
        return failed(f"my_shift_by must be a function (pe_pos, pe_1, k) -> row; got {type(my_shift_by).__name__}.")
    probes = [(d_model, 10000.0) for d_model in d_models]
    probes.insert(min(2, len(probes)), (10, _OTHER_BASE))  # rows of another base, early among the widths
    counts = (0, 0, 0)
    for d_model, base in probes:
        for pos, k in ((5, 1), (9, 0), (17, 2), (3, 7), (40, 100), (12, 4097)):
            _, problem = _shift_by_case(my_shift_by, d_model, pos, k, base=base)
            if problem is not None:
                return problem
        tiny, problem = _shift_by_case(my_shift_by, d_model, 6, _K_TINY, base=base)
        if problem is not None:
            return problem
        small, problem = _shift_by_case(my_shift_by, d_model, 11, _K_SMALL, base=base)
        if problem is not None:
            return problem
        budget = small + 4 * max(small - tiny, 5)
        large, problem = _shift_by_case(
            my_shift_by, d_model, 2, _K_LARGE, budget=budget, base=base, counts=(tiny, small)
        )
        if problem is not None:
            return problem
        counts = (tiny, small, large)
    tiny, small, large = counts
    first, second = small - tiny, large - small  # the growth over 5 more binary digits, then over 10 more
    ratio = second / first if first > 0 else math.inf if second > 0 else 0.0
    seen = (
        f"{tiny}, {small} and {large} torch operations for k = {_K_TINY}, {_K_SMALL} and {_K_LARGE:,} "
        f"(5, 10 and 20 binary digits) at d_model = {d_models[-1]}"
    )
    if ratio < 1.5:
        return failed(
            f"my_shift_by gives the right rows, but its work does not grow with k: {seen}, i.e. {first} more from "
            f"5 to 10 digits and {second} more from 10 to 20. A fixed amount of work covers only the offsets it was "
            "made for: the exercise asks for about log₂ k row products, as many doublings as k has binary digits "
            "(and no more)."
        )
    per_digit = second / 10
    setup = large - round(20 * per_digit)
    after = f" after a fixed set-up of about {setup}" if setup >= 2 * per_digit else ""
    return passed(
        f"my_shift_by reaches PE(pos + k) for k from 0 to {_K_LARGE:,} at d_model = {', '.join(map(str, d_models))} "
        f"and at base {_OTHER_BASE:g}, with no sin or cos: {seen}. The growth is what counts: {first} more for "
        f"the 5 digits from {_K_TINY} to {_K_SMALL}, {second} more for the 10 digits from {_K_SMALL} to "
        f"{_K_LARGE:,} ({ratio:.1f}×) — about {per_digit:.0f} operations per binary digit of k{after}. "
        "The work grows like log k, because M_a M_b = M_(a+b) lets each product double "
        "an offset you already have."
    )


# ----------------------------------------------------------------------------- exercise 1: the other layout


def _concat_permutation(d_model: int) -> torch.Tensor:
    """Column j of the concatenated table is column ``perm[j]`` of the paper's: sines first, then cosines."""
    return torch.cat([torch.arange(0, d_model, 2), torch.arange(1, d_model, 2)])


def _concat_from(c: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    """The concatenated-layout matrix with ``c`` on the diagonal and ``±s`` at (i, i + h) and (i + h, i)."""
    h = c.numel()
    m = torch.zeros(2 * h, 2 * h, dtype=torch.float64)
    i = torch.arange(h)
    m[i, i], m[i, i + h], m[i + h, i], m[i + h, i + h] = c, s, -s, c
    return m


def _names_used(code: object) -> set[str]:
    """The global names a function's code (and the code nested in it) refers to."""
    names: set[str] = set(getattr(code, "co_names", ()))
    for const in getattr(code, "co_consts", ()):
        if hasattr(const, "co_names"):
            names |= _names_used(const)
    return names


def _concat_slip(m: torch.Tensor, k: int, d_model: int, base: float, label: str) -> str:
    """Name the slip in a wrong concatenated-layout matrix (a hint: where to look, not the matrix)."""
    perm = _concat_permutation(d_model)
    inv = torch.argsort(perm)
    paper = offset_matrix(k, d_model, base)
    want = paper[perm][:, perm]
    err = float((m - want).abs().max())
    if _same(m, want, 1e-5):
        return (
            f"{label} is right only to float32 precision (off by {err:.0e}): build the matrix in float64 "
            "(`torch.zeros(..., dtype=torch.float64)`; torch.zeros alone is float32) and compute the frequencies in "
            "float64 too (`torch.tensor(base)` is float32; a Python float is float64)."
        )
    if d_model > 2 and _same(m, paper, 1e-9):
        return (
            f"{label}: that is M_k of the paper's interleaved layout. In the concatenated layout pair i is "
            f"columns (i, i + d_model/2), so each block's four entries move."
        )
    if _same(m, want.T, 1e-9):
        return (
            f"{label}: this is the transpose, which moves backwards (it is M_(−k)): check the signs of the sin "
            "entries — or you built the matrix for row vectors (row @ M, as in §2's table[:-k] @ M_k.T), while M "
            "must act on a column: PE_c(pos + k) = M PE_c(pos)."
        )
    if d_model > 2 and (_same(m, paper[perm], 1e-9) or _same(m, paper[:, perm], 1e-9)):
        moved = "rows" if _same(m, paper[perm], 1e-9) else "columns"
        other = "columns" if moved == "rows" else "rows"
        return (
            f"{label}: you permuted the {moved} of M_k but not its {other}. M maps a concatenated row to a "
            f"concatenated row: both the vector it reads and the vector it writes are permuted."
        )
    if d_model > 4 and _same(m, paper[inv][:, inv], 1e-9):
        return (
            f"{label}: you permuted with the inverse permutation. Column j of the concatenated row is column "
            "perm[j] of the paper's row: check which way your index array goes."
        )
    pattern = (m.abs() > 1e-12) == (want.abs() > 1e-12)
    if bool(pattern.all()):
        h = d_model // 2
        halves = torch.cat([torch.arange(h, d_model), torch.arange(0, h)])
        if d_model > 2 or k != 0:
            if _same(m, want[halves], 1e-9):
                return (
                    f"{label}: the two rows of each pair are exchanged. Row i of M makes the new sine (it lands in "
                    "column i of the result), row i + d_model/2 the new cosine."
                )
            b = k * base ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
            if _same(m, _concat_from(b.sin(), b.cos()), 1e-9):
                return (
                    f"{label}: sin b and cos b are swapped. At k = 0 the matrix must be the identity, so the "
                    "entries on the diagonal are the cosines."
                )
            for near_k in (k + 1, k - 1):
                if _same(m, offset_matrix(near_k, d_model, base)[perm][:, perm], 1e-9):
                    return f"{label}: your angles are those of the offset {near_k}, not {k}: use k itself."
        if _same(m.abs(), want.abs(), 1e-9):
            return f"{label}: the entries sit in the right places, but some signs are wrong."
        default = offset_matrix(k, d_model)[perm][:, perm]
        if base != 10000.0 and _same(m, default, 1e-9):
            return (
                f"{label}: the entries sit in the right places, but you ignored the base argument: this call "
                f"passed base = {base:g}, and your matrix is the one for base 10000."
            )
        return (
            f"{label}: the entries sit in the right places, but the angles are wrong. Pair i turns by "
            f"b = k·ω_i with ω_i = base^(−2i/d_model), i the pair index (0 … d_model/2 − 1), and the base the call "
            f"passes (here {base:g})."
        )
    return (
        f"{label} does not map PE_c(pos) to PE_c(pos + {k}): some entries are in the wrong places. Derive one pair: "
        "sin(a+b) = sin a·cos b + cos a·sin b; then find the columns that hold sin a and cos a in the concatenated row."
    )


@checker
def check_concat_offset(
    my_concat_offset: Callable[..., object] | None,
    cases: tuple[tuple[int, int], ...] = ((8, 3), (2, 1), (12, -5), (6, 40), (64, 1000)),
) -> Feedback:
    """Check ``my_concat_offset(k, d_model, base)``: the matrix ``M`` with ``PE_c(pos + k) = M PE_c(pos)`` for the
    concatenated ``[sin | cos]`` layout, i.e. ``M_k`` with rows and columns permuted (``M_k[perm][:, perm]``).

    Probed at several ``(d_model, k)`` and one other base, so a matrix written for one width fails; compared to
    1e-9. Fitting is refused: while the function runs, least squares, solvers, inverses and factorizations
    (torch — ``best_linear_map`` uses ``torch.linalg.lstsq`` — numpy, scipy) raise. Permuting the package's
    ``offset_matrix`` is accepted on purpose: knowing that ``P M_k Pᵀ`` is the answer is the derivation.
    """
    if is_placeholder(my_concat_offset):
        return not_done()
    for d_model, k in (*cases, (10, 7)):
        base = 100.0 if d_model == 10 else 10000.0
        label = f"my_concat_offset({k}, {d_model}, base={base:g})"
        if not callable(my_concat_offset):
            return failed(
                f"my_concat_offset must be a function (k, d_model, base) -> matrix; got {type(my_concat_offset).__name__}."
            )
        got, problem, _ = _run_guarded(label, my_concat_offset, ("solver",), k, d_model, base)
        if problem is not None:
            return problem
        m = _as_matrix(got)
        if m is None or m.shape != (d_model, d_model):
            shape = list(m.shape) if m is not None else type(got).__name__
            return failed(f"{label} must return a [{d_model}, {d_model}] matrix of real numbers, got {shape}.")
        if not bool(torch.isfinite(m).all()):
            return failed(f"{label} holds NaN or inf: every entry is a cos, a sin or 0.")
        perm = _concat_permutation(d_model)
        if _same(m, offset_matrix(k, d_model, base)[perm][:, perm], 1e-9):
            continue
        return failed(_concat_slip(m, k, d_model, base, label))
    code = getattr(my_concat_offset, "__code__", None)
    if {"offset_matrix", "offset_blocks"} & _names_used(code):
        return passed(
            "Right at every width and offset tried, by permuting M_k: the concatenated row is P·PE(pos) for a "
            "permutation P, so M = P M_k Pᵀ — rows and columns permuted the same way. (Placing each block's "
            "four entries at (i, i + d/2) by hand gives the same matrix.)"
        )
    return passed(
        "Right at every width and offset tried: the blocks of M_k are spread over the columns (i, i + d/2), "
        "i.e. M_k with its rows and columns permuted the same way as the table (M = P M_k Pᵀ)."
    )


# ----------------------------------------------------------------------------- exercise 3: the return of pair 0


def _distance(k: int) -> float:
    """How far pair 0 lands from its start after an offset k: |PE(pos+k) − PE(pos)| over columns 0, 1 = 2|sin(k/2)|."""
    return 2 * abs(math.sin(k / 2))


def _ripple_peaks(d_model: int, up_to: int = 50) -> list[int]:
    """The offsets k ≤ up_to where s(k) = Σ cos(k·ω_i) has a local maximum."""
    s = offset_similarity(up_to + 2, d_model)
    return [k for k in range(1, up_to + 1) if s[k] > s[k - 1] and s[k] > s[k + 1]]


@checker
def check_return_offset(answer: object, max_offset: int = 100) -> Feedback:
    """Check the offset ``k`` in ``1 ≤ k ≤ max_offset`` after which pair 0 comes back closest to where it started.

    Pair 0 turns by ``k·ω_0 = k`` radians (``ω_0 = 1`` for every d_model and base), so its block
    of ``M_k`` is closest to the identity, and ``(sin, cos)`` closest to its start (distance
    ``2|sin(k/2)|``, the same for every pos), when ``k`` is nearest a multiple of ``2π``.
    A one-element list, array or tensor is taken as its number.
    """
    if is_placeholder(answer):
        return not_done()
    if isinstance(answer, (list, tuple)) and len(answer) == 1:
        answer = answer[0]
    k, problem = as_integer(answer, f"an integer offset k between 1 and {max_offset}")
    if problem is not None:
        value = answer.item() if isinstance(answer, torch.Tensor) and answer.numel() == 1 else answer
        if (
            isinstance(value, numbers.Real)
            and not isinstance(value, bool)
            and math.isfinite(value)
            and value != 0
            and abs(float(value) / (2 * math.pi) - round(float(value) / (2 * math.pi))) < 1e-3
        ):
            return failed(
                "That is a multiple of 2π, but offsets are whole numbers of positions: k must be an integer, "
                "and no integer is exactly a multiple of 2π."
            )
        return problem
    assert k is not None  # set whenever problem is None
    if not 1 <= k <= max_offset:
        return failed(f"k = {k} is outside the search range 1 ≤ k ≤ {max_offset}.")
    best = min(range(1, max_offset + 1), key=_distance)
    if k == best:
        turns = round(best / (2 * math.pi))
        returns = ", ".join(str(round(2 * math.pi * n)) for n in range(1, 9))
        found = {d: _ripple_peaks(d) for d in (16, 64, 512)}
        peaks = {d: ", ".join(map(str, ks)) for d, ks in found.items()}
        not_at_64 = ", ".join(str(p) for p in found[16] if p not in found[64])
        return passed(
            f"k = {best}: pair 0 turns by {best} rad = {best / (2 * math.pi):.4f} full turns and lands "
            f"{_distance(best):.4f} from its start (2π ≈ {best}/{turns}). Pair 0 comes back near k = {returns}. "
            f"In §4, s(k) at d_model = 16 has its local maxima (k ≤ 50) at k = {peaks[16]}: at that width the "
            f"ripples follow pair 0's returns. At d_model = 64 they are at k = {peaks[64]} (not at {not_at_64}), "
            f"and at 512 only at k = {peaks[512]}: in wider models the peaks move off pair 0's returns, and most "
            "returns show no peak at all (§4: there the rises come from 8 and 64 fast pairs, not from pair 0 alone)."
        )
    miss = math.remainder(k, 2 * math.pi)
    if k in (6, 7):
        return failed(
            f"k = {k} is about one turn (2π ≈ 6.283) but misses a whole turn by {abs(miss):.3f} rad "
            f"(distance {_distance(k):.3f}). Several turns can fit an integer much better: for n = 1, 2, 3, … "
            "turns, how far is n·2π from the nearest integer?"
        )
    if k % best == 0:
        return failed(
            f"k = {k} comes back close (distance {_distance(k):.4f}), but a k with fewer turns comes back closer: "
            "the miss of n turns is n times the miss of one."
        )
    return failed(
        f"After k = {k} the pair is {abs(miss):.3f} rad from a whole number of turns (distance "
        f"{_distance(k):.4f}); some k in 1 … {max_offset} does much better. You want n·2π close to an integer: "
        "a well-known fraction for π gives it."
    )
