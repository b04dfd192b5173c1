"""CRC-32C inside compiled kernels: the ``crc32c`` package's own C function, called through its
address, so a kernel checks a batch's CRC with no Python call in between (the leader's append
takes one compiled call for a whole 16 KiB batch).

ADDRESS is the function's address, or 0 when it cannot be used (another pointer width, no
such symbol in the installed package, or a result that disagrees with ``crc32c()`` on the
test buffers); callers then compute the CRC in Python. The address is an argument of the
kernels, not a constant in them, so they stay in numba's on-disk cache.
"""

from __future__ import annotations

import ctypes

import crc32c as _package
import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core.extending import intrinsic

# The package's C functions, both uint32_t f(uint32_t crc, const unsigned char *data, size_t length),
# taking and returning the CRC register without the final inversion.
_HARDWARE_SYMBOL = "_crc32c_hw_adler"
_SOFTWARE_SYMBOL = "_crc32c_sw_slicing_by_8"
_INVERT = 0xFFFFFFFF
# Lengths around the hardware function's block sizes (it splits long buffers in three).
_TEST_LENGTHS = (0, 1, 7, 8, 61, 1000, 16 * 1024 + 3, 200_000)


def _address() -> int:
    if ctypes.sizeof(ctypes.c_void_p) != 8:
        return 0
    symbol = _HARDWARE_SYMBOL if _package.hardware_based else _SOFTWARE_SYMBOL
    try:
        function = getattr(ctypes.CDLL(_package._crc32c.__file__), symbol)
    except (AttributeError, OSError):
        return 0
    function.restype = ctypes.c_uint32
    function.argtypes = (ctypes.c_uint32, ctypes.c_char_p, ctypes.c_size_t)
    pattern = bytes(range(251)) * (max(_TEST_LENGTHS) // 251 + 1)
    for length in _TEST_LENGTHS:
        data = pattern[length % 13:length % 13 + length]
        if function(_INVERT, data, length) ^ _INVERT != _package.crc32c(data):
            return 0
    return ctypes.cast(function, ctypes.c_void_p).value or 0


ADDRESS = _address()


@intrinsic
def _call(typingctx, address, register, pointer, length):
    """Call the C function at `address` on `length` bytes at `pointer`."""
    signature = types.uint32(types.int64, types.uint32, types.uintp, types.intp)

    def codegen(context, builder, sig, args):
        address, register, pointer, length = args
        byte_pointer = ir.IntType(8).as_pointer()
        function_type = ir.FunctionType(ir.IntType(32), (ir.IntType(32), byte_pointer, ir.IntType(64)))
        function = builder.inttoptr(address, function_type.as_pointer())
        return builder.call(function, (register, builder.inttoptr(pointer, byte_pointer), length))

    return signature, codegen


@njit(cache=True, nogil=True)
def crc32c_of(address, buf, start, stop):
    """The CRC-32C of buf[start:stop] (a contiguous uint8 array) by the function at `address`
    (ADDRESS, which must not be 0)."""
    register = _call(address, np.uint32(_INVERT), buf.ctypes.data + start, stop - start)
    return np.int64(register ^ np.uint32(_INVERT))
