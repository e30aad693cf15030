"""A small GGUF v3 writer and reader (numpy only), for the exporter and its checks.

Format (little-endian): "GGUF", uint32 version, uint64 n_tensors, uint64 n_kv; then n_kv
(key string, uint32 value type, value); then n_tensors (name string, uint32 n_dims, uint64
dims[n_dims] innermost first, uint32 ggml type, uint64 offset into the data section); padding
to general.alignment (32); the data section, each tensor starting at an aligned offset.
Strings are uint64 length + UTF-8 bytes; arrays are uint32 element type + uint64 count + items.
"""
import struct

import numpy as np

GGUF_MAGIC = b"GGUF"
GGUF_VERSION = 3
ALIGNMENT = 32

# metadata value types
T_UINT8, T_INT8, T_UINT16, T_INT16, T_UINT32, T_INT32, T_FLOAT32, T_BOOL, T_STRING, T_ARRAY, \
    T_UINT64, T_INT64, T_FLOAT64 = range(13)
_SCALAR_FORMATS = {T_UINT8: "<B", T_INT8: "<b", T_UINT16: "<H", T_INT16: "<h", T_UINT32: "<I",
                   T_INT32: "<i", T_FLOAT32: "<f", T_BOOL: "<?", T_UINT64: "<Q", T_INT64: "<q",
                   T_FLOAT64: "<d"}

# ggml tensor types
GGML_F32, GGML_F16, GGML_Q8_0 = 0, 1, 8
Q8_0_BLOCK = 32  # values per Q8_0 block: float16 scale + 32 int8


def quantize_q8_0(values: np.ndarray) -> bytes:
    """ggml's reference Q8_0: per block of 32, d = max|x| / 127, q = round(x / d)."""
    blocks = values.astype(np.float32).reshape(-1, Q8_0_BLOCK)  # (n_blocks, 32)
    amax = np.abs(blocks).max(axis=1)
    scale = amax / 127.0
    inv = np.where(scale > 0, 1.0 / np.where(scale > 0, scale, 1.0), 0.0).astype(np.float32)
    # round half away from zero, as C's roundf
    scaled = blocks * inv[:, None]
    quants = (np.sign(scaled) * np.floor(np.abs(scaled) + 0.5)).astype(np.int8)
    out = np.zeros(len(blocks), dtype=[("d", "<f2"), ("qs", "i1", (Q8_0_BLOCK,))])
    out["d"], out["qs"] = scale.astype(np.float16), quants
    return out.tobytes()


def dequantize_q8_0(raw: bytes, n_values: int) -> np.ndarray:
    blocks = np.frombuffer(raw, dtype=[("d", "<f2"), ("qs", "i1", (Q8_0_BLOCK,))],
                           count=n_values // Q8_0_BLOCK)
    return (blocks["d"].astype(np.float32)[:, None] * blocks["qs"].astype(np.float32)).reshape(-1)


class GgufWriter:
    def __init__(self):
        self.kv = []        # (key, type, value, element type for arrays)
        self.tensors = []   # (name, dims innermost first, ggml type, bytes)

    def add(self, key: str, vtype: int, value, element_type: int = None):
        self.kv.append((key, vtype, value, element_type))

    def add_tensor(self, name: str, array: np.ndarray, ggml_type: int):
        """array in row-major (outer, ..., inner) numpy order; GGUF dims are the reverse."""
        dims = list(reversed(array.shape))
        if ggml_type == GGML_F32:
            raw = np.ascontiguousarray(array, dtype="<f4").tobytes()
        elif ggml_type == GGML_F16:
            raw = np.ascontiguousarray(array, dtype="<f2").tobytes()
        elif ggml_type == GGML_Q8_0:
            if dims[0] % Q8_0_BLOCK:
                raise ValueError(f"{name}: row length {dims[0]} is not a multiple of 32 for Q8_0")
            raw = quantize_q8_0(np.ascontiguousarray(array).reshape(-1))
        else:
            raise ValueError(f"{name}: unsupported ggml type {ggml_type}")
        self.tensors.append((name, dims, ggml_type, raw))

    @staticmethod
    def _string(s: str) -> bytes:
        data = s.encode("utf-8")
        return struct.pack("<Q", len(data)) + data

    def _value(self, vtype: int, value, element_type) -> bytes:
        if vtype == T_STRING:
            return self._string(value)
        if vtype == T_ARRAY:
            head = struct.pack("<IQ", element_type, len(value))
            if element_type == T_STRING:
                return head + b"".join(self._string(v) for v in value)
            return head + np.asarray(value, dtype=_SCALAR_FORMATS[element_type]).tobytes()
        return struct.pack(_SCALAR_FORMATS[vtype], value)

    def write(self, path: str):
        header = bytearray(GGUF_MAGIC + struct.pack("<IQQ", GGUF_VERSION, len(self.tensors),
                                                     len(self.kv)))
        for key, vtype, value, element_type in self.kv:
            header += self._string(key) + struct.pack("<I", vtype)
            header += self._value(vtype, value, element_type)
        offset = 0
        for name, dims, ggml_type, raw in self.tensors:
            header += self._string(name) + struct.pack("<I", len(dims))
            header += struct.pack(f"<{len(dims)}Q", *dims) + struct.pack("<IQ", ggml_type, offset)
            offset += len(raw) + (-len(raw)) % ALIGNMENT
        header += b"\0" * ((-len(header)) % ALIGNMENT)
        with open(path, "wb") as f:
            f.write(header)
            for _name, _dims, _type, raw in self.tensors:
                f.write(raw + b"\0" * ((-len(raw)) % ALIGNMENT))


def read_gguf(path: str):
    """Returns (metadata dict, {name: float32 array in numpy order}) of a GGUF file."""
    data = memoryview(open(path, "rb").read())
    pos = 0

    def take(fmt):
        nonlocal pos
        values = struct.unpack_from(fmt, data, pos)
        pos += struct.calcsize(fmt)
        return values if len(values) > 1 else values[0]

    def string():
        nonlocal pos
        n = take("<Q")
        s = bytes(data[pos:pos + n]).decode("utf-8", errors="replace")
        pos += n
        return s

    def value(vtype):
        if vtype == T_STRING:
            return string()
        if vtype == T_ARRAY:
            etype, count = take("<I"), take("<Q")
            return [value(etype) for _ in range(count)]
        return take(_SCALAR_FORMATS[vtype])

    if bytes(data[:4]) != GGUF_MAGIC:
        raise ValueError(f"{path}: not a GGUF file")
    pos = 4
    version, n_tensors, n_kv = take("<I"), take("<Q"), take("<Q")
    meta = {"GGUF.version": version}
    for _ in range(n_kv):
        key = string()
        meta[key] = value(take("<I"))
    infos = []
    for _ in range(n_tensors):
        name = string()
        n_dims = take("<I")
        dims = [take("<Q") for _ in range(n_dims)]
        infos.append((name, dims, take("<I"), take("<Q")))
    alignment = meta.get("general.alignment", ALIGNMENT)
    base = pos + (-pos) % alignment
    tensors = {}
    for name, dims, ggml_type, offset in infos:
        n = int(np.prod(dims))
        start = base + offset
        if ggml_type == GGML_F32:
            flat = np.frombuffer(data, dtype="<f4", count=n, offset=start)
        elif ggml_type == GGML_F16:
            flat = np.frombuffer(data, dtype="<f2", count=n, offset=start).astype(np.float32)
        elif ggml_type == GGML_Q8_0:
            flat = dequantize_q8_0(bytes(data[start:start + n // 32 * 34]), n)
        else:
            raise ValueError(f"{path}: tensor {name} has unsupported type {ggml_type}")
        tensors[name] = np.asarray(flat, dtype=np.float32).reshape(list(reversed(dims)))
    return meta, tensors
