"""pe_lessons.sinusoidal against an independent float64 formula, its properties, and bad input."""

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from pe_lessons import SinusoidalPositionalEncoding, inverse_frequencies, pe_formula, sinusoidal_table, wavelengths

widths = st.integers(1, 64).map(lambda h: 2 * h)
bases = st.sampled_from([2.0, 100.0, 10000.0, 500000.0]) | st.floats(1.5, 1e6)


def reference(positions, d_model, base=10000.0):
    """Independent float64 formula: the columns written one by one from the paper."""
    pos = torch.as_tensor(positions, dtype=torch.float64)[:, None]
    out = torch.empty(pos.shape[0], d_model, dtype=torch.float64)
    for col in range(d_model):
        i = col // 2
        angle = pos[:, 0] / base ** (2 * i / d_model)
        out[:, col] = torch.sin(angle) if col % 2 == 0 else torch.cos(angle)
    return out


def test_pe_formula_matches_reference_and_paper_layout():
    row = pe_formula(3, 8)
    assert len(row) == 8
    torch.testing.assert_close(torch.tensor(row, dtype=torch.float64), reference([3], 8)[0], rtol=0, atol=1e-15)
    assert row[0] == math.sin(3) and row[1] == math.cos(3)


@given(max_len=st.integers(1, 300), d_model=widths, base=bases)
def test_table_matches_reference_in_float32_and_float64(max_len, d_model, base):
    ref = reference(range(max_len), d_model, base)
    t32 = sinusoidal_table(max_len, d_model, base=base)
    t64 = sinusoidal_table(max_len, d_model, base=base, dtype=torch.float64)
    assert t32.dtype == torch.float32 and t32.shape == (max_len, d_model)
    assert (t32.double() - ref).abs().max() <= 5e-7
    torch.testing.assert_close(t64, ref, rtol=0, atol=1e-12)


def test_float32_table_is_accurate_below_2_pow_20():
    max_len = 2**20
    for d_model in (8, 64):
        table = sinusoidal_table(max_len, d_model)
        err = (table.double() - reference(range(max_len), d_model)).abs().max().item()
        assert err <= 5e-7, (d_model, err)
    # the naive float32-angle table is far off at such positions: the test above can fail
    pos = torch.arange(max_len, dtype=torch.float32)[:, None]
    naive = torch.sin(pos * inverse_frequencies(8, dtype=torch.float32))
    assert (naive.double() - reference(range(max_len), 8)[:, 0::2]).abs().max() > 1e-3


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_low_precision_tables_are_exact_values_rounded_once(dtype):
    exact = reference(range(70000), 16)
    torch.testing.assert_close(sinusoidal_table(70000, 16, dtype=dtype), exact.to(dtype), rtol=0, atol=0)
    # computing the angles in the low dtype itself would be badly wrong (positions > 256 are not even representable in bf16)
    pos = torch.arange(60000, dtype=dtype)[:, None]  # (fp16 overflows past 65504)
    naive = torch.sin(pos * inverse_frequencies(16, dtype=dtype))
    assert (naive.double() - exact[:60000, 0::2]).abs().max() > 0.1


def test_float64_table_is_exact_to_float64_angle_rounding():
    # two float64 formulas differ only by the rounding of pos*omega: < 70000 * 2**-52 * a few
    torch.testing.assert_close(
        sinusoidal_table(70000, 16, dtype=torch.float64), reference(range(70000), 16), rtol=0, atol=1e-10
    )


@given(max_len=st.integers(1, 200), d_model=widths, base=bases)
def test_properties(max_len, d_model, base):
    table = sinusoidal_table(max_len, d_model, base=base, dtype=torch.float64)
    # PE(0) = [0, 1, 0, 1, ...]
    assert torch.equal(table[0], torch.tensor([0.0, 1.0] * (d_model // 2), dtype=torch.float64))
    # every row has norm sqrt(d_model / 2)
    torch.testing.assert_close(table.norm(dim=1), torch.full((max_len,), math.sqrt(d_model / 2), dtype=torch.float64))
    # each (sin, cos) pair lies on the unit circle
    torch.testing.assert_close(
        table[:, 0::2] ** 2 + table[:, 1::2] ** 2, torch.ones(max_len, d_model // 2, dtype=torch.float64)
    )


def test_wavelengths_form_a_geometric_progression_from_2pi_to_2pi_base():
    lam = wavelengths(512)
    assert lam[0].item() == pytest.approx(2 * math.pi)
    assert (lam[-1] / (2 * math.pi)).item() == pytest.approx(10000 ** (510 / 512))
    ratios = lam[1:] / lam[:-1]
    torch.testing.assert_close(ratios, torch.full_like(ratios, 10000 ** (2 / 512)))


def test_module_adds_table_and_respects_train_eval():
    torch.manual_seed(0)
    pe = SinusoidalPositionalEncoding(16, max_len=32, dropout=0.5)
    x = torch.randn(2, 10, 16)
    pe.eval()
    torch.testing.assert_close(pe(x), x + sinusoidal_table(10, 16))
    pe.train()
    out = pe(x)
    dropped = out == 0
    assert dropped.any() and not dropped.all()
    torch.testing.assert_close(out[~dropped], ((x + sinusoidal_table(10, 16)) * 2)[~dropped])


def test_module_grows_past_max_len_and_keeps_dtype():
    pe = SinusoidalPositionalEncoding(8, max_len=4).eval()
    x = torch.zeros(1, 11, 8, dtype=torch.float64)
    out = pe(x)
    assert out.dtype == torch.float64 and pe.max_len >= 11
    torch.testing.assert_close(out[0], sinusoidal_table(11, 8).double())
    assert "table" not in pe.state_dict()


def test_module_to_moves_table():
    pe = SinusoidalPositionalEncoding(8, max_len=4).to(torch.device("meta"))
    assert pe.table.device.type == "meta"


@pytest.mark.parametrize(
    "call, error, words",
    [
        (lambda: sinusoidal_table(10, 7), ValueError, "d_model"),
        (lambda: sinusoidal_table(10, 0), ValueError, "d_model"),
        (lambda: sinusoidal_table(10, -4), ValueError, "d_model"),
        (lambda: sinusoidal_table(10, 8.0), TypeError, "d_model"),
        (lambda: sinusoidal_table(-1, 8), ValueError, "max_len"),
        (lambda: sinusoidal_table(2.5, 8), TypeError, "max_len"),
        (lambda: sinusoidal_table(True, 8), TypeError, "max_len"),
        (lambda: sinusoidal_table(10, 8, base=0), ValueError, "base"),
        (lambda: sinusoidal_table(10, 8, base=-3.0), ValueError, "base"),
        (lambda: sinusoidal_table(10, 8, base=float("nan")), ValueError, "base"),
        (lambda: sinusoidal_table(10, 8, dtype=torch.int64), TypeError, "dtype"),
        (lambda: pe_formula(-1, 8), ValueError, "pos"),
        (lambda: pe_formula(1, 5), ValueError, "d_model"),
        (lambda: SinusoidalPositionalEncoding(9), ValueError, "d_model"),
        (lambda: SinusoidalPositionalEncoding(8, max_len=0), ValueError, "max_len"),
        (lambda: SinusoidalPositionalEncoding(8, dropout=1.5), ValueError, "dropout"),
        (lambda: SinusoidalPositionalEncoding(8)(torch.zeros(2, 3, 6)), ValueError, "d_model=8"),
        (lambda: SinusoidalPositionalEncoding(8)(torch.zeros(3, 8)), ValueError, "x must have shape"),
        (
            lambda: SinusoidalPositionalEncoding(8)(torch.zeros(1, 3, 8, dtype=torch.long)),
            TypeError,
            "x must hold floating",
        ),
        (lambda: SinusoidalPositionalEncoding(8)([[0.0] * 8]), TypeError, "x must be a torch.Tensor"),
    ],
)
def test_bad_input_raises_clear_errors(call, error, words):
    with pytest.raises(error, match=words):
        call()


def test_empty_table():
    assert sinusoidal_table(0, 4).shape == (0, 4)


def test_a_rows_values_do_not_depend_on_the_table_length():
    long = sinusoidal_table(5000, 32)
    for n in (1, 7, 255, 256, 257, 1000):
        assert torch.equal(sinusoidal_table(n, 32), long[:n])


def test_float32_table_is_bit_identical_whatever_the_cpu_vector_unit():
    """Stored notebook outputs must replay on other machines: no fused multiply-add in the table."""
    import subprocess
    import sys

    code = (
        "import hashlib, sys; from pe_lessons import sinusoidal_table; "
        "sys.stdout.write(hashlib.sha256(sinusoidal_table(70000, 32).numpy().tobytes()).hexdigest())"
    )
    import hashlib

    here = hashlib.sha256(sinusoidal_table(70000, 32).numpy().tobytes()).hexdigest()
    env = dict(__import__("os").environ, ATEN_CPU_CAPABILITY="default")
    there = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert there == here


@pytest.mark.parametrize(
    "call, words",
    [
        (lambda: sinusoidal_table(10**9, 512), "max_len × d_model.*GiB"),
        (lambda: sinusoidal_table(10**8, 64, dtype=torch.float16), "max_len × d_model.*float64"),
        (lambda: sinusoidal_table(4, 2 * 10**12), "d_model"),
        (lambda: pe_formula(1, 10**9), "d_model.*Python list"),
        (lambda: inverse_frequencies(2 * 10**12), "d_model"),
        (lambda: SinusoidalPositionalEncoding(512, max_len=10**9), "max_len × d_model"),
    ],
)
def test_oversized_requests_are_refused_before_allocating(call, words):
    with pytest.raises(ValueError, match=words):
        call()


def test_memory_limit_can_be_lowered_raised_and_set_by_environment(monkeypatch):
    from pe_lessons import memory_limit, set_memory_limit

    try:
        set_memory_limit(4096)
        assert memory_limit() == 4096
        assert sinusoidal_table(500, 2).shape == (500, 2)  # 512 padded rows × 2 × 4 bytes = 4096
        with pytest.raises(ValueError, match=r"need 6\.0 KiB, more than the limit of 4\.0 KiB"):
            sinusoidal_table(600, 2)
    finally:
        set_memory_limit(None)
    assert sinusoidal_table(600, 2).shape == (600, 2)
    monkeypatch.setenv("PE_LESSONS_MAX_BYTES", "4096")
    assert memory_limit() == 4096
    with pytest.raises(ValueError, match="max_len"):
        sinusoidal_table(1000, 2)
    monkeypatch.setenv("PE_LESSONS_MAX_BYTES", "lots")
    with pytest.raises(ValueError, match="PE_LESSONS_MAX_BYTES"):
        memory_limit()
    monkeypatch.delenv("PE_LESSONS_MAX_BYTES")
    with pytest.raises(TypeError, match="nbytes"):
        set_memory_limit(1.5)
    with pytest.raises(ValueError, match="nbytes"):
        set_memory_limit(0)


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is present")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_cuda_on_a_machine_without_one_says_so(dtype):
    with pytest.raises(ValueError, match="device='cuda' asks for a GPU"):
        sinusoidal_table(4, 8, dtype=dtype, device="cuda")


def test_bad_devices_are_named():
    with pytest.raises(ValueError, match="device"):
        sinusoidal_table(4, 8, device="nonsense")
    with pytest.raises(TypeError, match="device"):
        sinusoidal_table(4, 8, device=3.5)


def test_meta_device_gives_shapes_only():
    for dtype in (torch.float32, torch.float64):
        t = sinusoidal_table(1000, 8, dtype=dtype, device="meta")
        assert t.device.type == "meta" and t.shape == (1000, 8) and t.dtype == dtype


def test_gpu_path_cached_subtables_give_the_cpu_tables_bits_and_stay_bounded():
    """A GPU call combines cached sub-tables on the device; run that same path on the CPU: same bits."""
    from pe_lessons import sinusoidal as sm

    sm._SUBTABLES.clear()
    cpu = torch.device("cpu")
    first = sinusoidal_table(3000, 16)  # the CPU path: sub-tables computed afresh, not cached
    assert not sm._SUBTABLES
    assert torch.equal(sm.angle_addition(*sm._subtables(12, 16, 10000.0, cpu), 3000), first)  # computed, cached
    assert len(sm._SUBTABLES) == 1
    assert torch.equal(sm.angle_addition(*sm._subtables(12, 16, 10000.0, cpu), 3000), first)  # from the cache
    assert torch.equal(sm.angle_addition(*sm._subtables(3, 16, 10000.0, cpu), 700), first[:700])  # a slice of it
    assert torch.equal(sm.angle_addition(*sm._subtables(36, 16, 10000.0, cpu), 9000)[:3000], first)  # grown
    assert len(sm._SUBTABLES) == 1 and sm._SUBTABLES[(16, 10000.0, "cpu")][2].shape[0] == 36
    # a non-CPU device goes through the cache (meta: shapes only) and the cache stays bounded
    sm._SUBTABLES.clear()
    for d in range(2, 2 * (sm._SUBTABLES_MAX_ENTRIES + 4), 2):
        assert sinusoidal_table(300, d, device="meta").shape == (300, d)
    assert len(sm._SUBTABLES) == sm._SUBTABLES_MAX_ENTRIES
    assert all(key[2] == "meta" for key in sm._SUBTABLES)
    big = 2 * sm._SUBTABLES_MAX_BYTES // (8 * 32) * 256  # rows whose coarse table is over the byte bound
    from pe_lessons import set_memory_limit

    try:
        set_memory_limit(2**40)  # meta tensors take no memory
        sinusoidal_table(big, 64, device="meta")
    finally:
        set_memory_limit(None)
    assert (64, 10000.0, "meta") not in sm._SUBTABLES
    sm._SUBTABLES.clear()


@pytest.mark.parametrize(
    "cast, dtype", [(lambda m: m.half(), torch.float16), (lambda m: m.to(torch.bfloat16), torch.bfloat16)]
)
def test_half_and_bfloat16_modules_keep_the_table_exact_and_cast_at_use(cast, dtype):
    pe = SinusoidalPositionalEncoding(64, max_len=4096).eval()
    x = torch.randn(2, 4096, 64)
    before = pe(x)
    cast(pe)
    assert pe.table.dtype == torch.float32
    assert torch.equal(pe(x), before)  # a float32 input keeps its exact encoding
    # rounding the table to 16 bits (what a plain buffer cast would do) moves it by up to ~1 ulp of 1
    rounded = sinusoidal_table(4096, 64).to(dtype).float()
    assert (rounded - sinusoidal_table(4096, 64)).abs().max() > (2.0e-4 if dtype == torch.float16 else 1e-3)
    # a low-precision input gets the float32 table rounded once: as close to exact as rounding allows
    xl = x.to(dtype)
    assert pe(xl).dtype == dtype
    assert torch.equal(pe(xl), xl + sinusoidal_table(4096, 64).to(dtype))
    exact = sinusoidal_table(4096, 64, dtype=torch.float64)
    once = (exact.to(dtype).double() - exact).abs().max()
    assert (sinusoidal_table(4096, 64).to(dtype).double() - exact).abs().max() <= once + 5e-7
    pe.float()
    assert torch.equal(pe(x), before)


def test_double_module_recomputes_the_exact_float64_table():
    pe = SinusoidalPositionalEncoding(16, max_len=300).double()
    assert pe.table.dtype == torch.float64
    assert torch.equal(pe.table, sinusoidal_table(300, 16, dtype=torch.float64))
    pe.eval()(torch.zeros(1, 700, 16, dtype=torch.float64))  # grows in float64
    assert pe.table.dtype == torch.float64
    assert torch.equal(pe.table[:700], sinusoidal_table(700, 16, dtype=torch.float64))


def test_table_and_growing_module_compile_with_inductor():
    """``out=`` writes into views broke AOTAutograd/Inductor; the traced path is functional."""
    compiled = torch.compile(sinusoidal_table)
    for n in (300, 600):
        torch.testing.assert_close(compiled(n, 16), sinusoidal_table(n, 16), rtol=0, atol=1e-7)
    pe = SinusoidalPositionalEncoding(16, max_len=4)
    compiled_pe = torch.compile(pe)
    for n in (10, 40):  # the table grows inside the compiled forward
        x = torch.randn(1, n, 16, requires_grad=True)
        out = compiled_pe(x)
        torch.testing.assert_close(out, x + sinusoidal_table(n, 16), rtol=0, atol=1e-6)
        out.sum().backward()


def test_variant_tables_refuse_oversized_requests_too():
    from pe_lessons.variants import VARIANTS

    for name, build in VARIANTS.items():
        with pytest.raises(ValueError, match="max_len × d_model"):
            build(10**9, 512)
        assert build(3, 4).shape == (3, 4), name


@pytest.mark.parametrize("value", ["0", "-5", "inf", "nan"])
def test_a_non_positive_or_non_finite_environment_limit_is_an_error(monkeypatch, value):
    from pe_lessons import memory_limit

    monkeypatch.setenv("PE_LESSONS_MAX_BYTES", value)
    with pytest.raises(ValueError, match="PE_LESSONS_MAX_BYTES must be a"):
        memory_limit()
