"""A software prefetch for numba kernels that chase pointers through large arrays.

``prefetch(array, flat_index)`` compiles to LLVM's ``llvm.prefetch`` (read, high locality, data
cache) on the address of ``array.flat[flat_index]`` of a C-contiguous array: a hint that loads
the cache line early and never faults, so an index that is out of range (a list's ``-1`` end,
say) is harmless. A kernel that walks linked lists whose nodes lie at random in a large array
(the HET cache's LRU and LFU lists) issues it a few nodes ahead, so the memory latency of the
next nodes overlaps the work on the current one instead of stalling the loop.
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

__all__ = ["prefetch"]


@intrinsic
def prefetch(typingctx, array, flat_index):  # pragma: no cover - compiled
    """Prefetch the cache line holding ``array.flat[flat_index]`` (numba kernels only).

    Args:
        array: a C-contiguous numba array.
        flat_index: an integer element offset from the array's start.
    """
    if not isinstance(array, types.Array) or not isinstance(flat_index, types.Integer):
        return None
    sig = types.void(array, flat_index)

    def codegen(context, builder, signature, args):
        data = context.make_array(signature.args[0])(context, builder, args[0]).data
        address = builder.gep(data, [args[1]])
        i8p, i32 = ir.IntType(8).as_pointer(), ir.IntType(32)
        fn = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32]),
            "llvm.prefetch.p0")
        # rw = 0 (read), locality = 3 (keep in all levels), cache type = 1 (data)
        builder.call(fn, [builder.bitcast(address, i8p), i32(0), i32(3), i32(1)])
        return context.get_dummy_value()

    return sig, codegen
