"""A software prefetch for numba kernels that chase pointers through large arrays.

``prefetch(array, flat_index)`` compiles to LLVM's ``llvm.prefetch`` (read, high locality, data
cache) on the address of ``array.flat[flat_index]`` of a C-contiguous array: a hint that loads
the cache line early and never faults, so an index that is out of range (a list's ``-1`` end,
say) is harmless. A kernel that walks linked lists whose nodes lie at random in a large array
(the HET cache's LRU and LFU lists) issues it a few nodes ahead, so the memory latency of the
next nodes overlaps the work on the current one instead of stalling the loop.

``prefetch_row(array, i)`` and ``prefetch_row_w(array, i)`` do the same for the first element
of ``array[i]`` of an array of any layout (a strided column view included: its stride is
honoured), the second with the intent to write (a read-modify-write's line arrives exclusive).
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

__all__ = ["prefetch", "prefetch_row", "prefetch_row_w"]


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


def _row_prefetch(rw: int):
    """An intrinsic prefetching ``array[i, 0, ...]`` with read (0) or write (1) intent."""

    def impl(typingctx, array, index):  # pragma: no cover - compiled
        if not isinstance(array, types.Array) or not isinstance(index, types.Integer):
            return None
        sig = types.void(array, index)

        def codegen(context, builder, signature, args):
            ary = context.make_array(signature.args[0])(context, builder, args[0])
            strides = cgutils.unpack_tuple(builder, ary.strides)
            offset = builder.mul(builder.sext(args[1], strides[0].type), strides[0])
            i8p, i32 = ir.IntType(8).as_pointer(), ir.IntType(32)
            address = builder.gep(builder.bitcast(ary.data, i8p), [offset])
            fn = cgutils.get_or_insert_function(
                builder.module, ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32]),
                "llvm.prefetch.p0")
            builder.call(fn, [address, i32(rw), i32(3), i32(1)])
            return context.get_dummy_value()

        return sig, codegen

    return impl


prefetch_row = intrinsic(_row_prefetch(0))
prefetch_row.__doc__ = "Prefetch the line of ``array[i]``'s first element to read (numba only)."
prefetch_row_w = intrinsic(_row_prefetch(1))
prefetch_row_w.__doc__ = "Prefetch the line of ``array[i]``'s first element to write (numba only)."
