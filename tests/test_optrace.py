"""pe_lessons.optrace: which operations a function runs, and the bytes each reads and writes."""

import pytest
import torch

from pe_lessons.baselines import hf_cos_sin, hf_rope
from pe_lessons.optrace import trace_ops


def test_trace_ops_counts_the_five_kernels_and_ten_n_elements_of_the_eager_formula():
    x = torch.randn(2, 3, 16, 8)
    cos, sin = hf_cos_sin(16, 8)
    ops = trace_ops(hf_rope, x, cos, sin)
    assert [o["op"] for o in ops if o["kernel"]] == ["mul", "neg", "cat", "mul", "add"]
    assert [o["op"] for o in ops if not o["kernel"]] == ["chunk"]
    n, t = x.numel(), cos.numel()
    assert sum(o["read_bytes"] + o["write_bytes"] for o in ops) == 4 * (10 * n + 2 * t)


def test_trace_ops_sees_out_in_place_setitem_and_allocations():
    x, y = torch.ones(4, 6), torch.ones(4, 6)
    out = torch.empty(4, 6)

    def fn(a, b):
        buf = torch.empty_like(a)
        torch.mul(a, b, out=out)
        out.add_(a)
        buf[:, :3] = a[:, :3]
        return a.view(-1)

    ops = {o["op"]: o for o in trace_ops(fn, x, y)}
    assert not ops["empty_like"]["kernel"] and not ops["view"]["kernel"]
    assert ops["mul"]["kernel"] and ops["mul"]["read_bytes"] == 2 * 96 and ops["mul"]["write_bytes"] == 96
    assert ops["add_"]["kernel"] and ops["add_"]["read_bytes"] == 2 * 96 and ops["add_"]["write_bytes"] == 96
    assert ops["setitem"]["kernel"] and ops["setitem"]["write_bytes"] == 48
    with pytest.raises(TypeError):
        trace_ops(3)


def test_trace_ops_sees_augmented_assignment_and_unary_invert_as_kernels():
    x, y = torch.ones(3, 4), torch.ones(3, 4)
    flags = torch.ones(3, 4, dtype=torch.bool)

    def fn(a, b, m):
        a += b
        return ~m

    ops = trace_ops(fn, x, y, flags)
    assert [o["op"] for o in ops] == ["add_", "invert"]  # x += y reaches torch as add_
    assert all(o["kernel"] for o in ops)
    assert ops[1]["read_bytes"] == ops[1]["write_bytes"] == 12


def test_trace_ops_does_not_count_the_overwritten_target_of_copy_as_read():
    src, dst = torch.ones(4, 6, dtype=torch.bfloat16), torch.empty(4, 6)
    (copy,) = [o for o in trace_ops(lambda: dst.copy_(src)) if o["kernel"]]
    assert copy["op"] == "copy_" and copy["read_bytes"] == 24 * 2 and copy["write_bytes"] == 24 * 4
    (fill,) = [o for o in trace_ops(lambda: dst.fill_(1.0)) if o["kernel"]]
    assert fill["read_bytes"] == 0 and fill["write_bytes"] == 24 * 4


def test_generated_code_shows_one_fused_kernel_for_the_eager_formula_without_compiling_it():
    from pe_lessons.optrace import generated_code

    x = torch.randn(1, 2, 8, 8, dtype=torch.bfloat16)
    cos, sin = hf_cos_sin(8, 8)
    code = generated_code(hf_rope, x, cos, sin)  # bfloat16 x, float32 tables: conversions in the kernel
    assert code.count("async_compile.cpp_pybinding(") == 1  # one kernel for the five eager ones
    stores = [line for line in code.splitlines() if "out_ptr0[" in line and "=" in line.split("out_ptr0[", 1)[1]]
    assert len(stores) == 1 and "const at::BFloat16* in_ptr0" in code and "c10::convert<float>" in code
    again = generated_code(hf_rope, x, cos, sin)  # generated afresh, not from a cache (which has no source)
    assert again.split("extern", 1)[1].split("'''")[0] == code.split("extern", 1)[1].split("'''")[0]
    with pytest.raises(TypeError, match="callable"):
        generated_code(3, x)
