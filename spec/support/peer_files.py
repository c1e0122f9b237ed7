"""The Python side of spec/peer_files_spec.lua: PyTorch and NumPy read tocha's files, and write
files tocha reads.

    python3 peer_files.py check DIR K   # DIR/tocha.safetensors and DIR/tocha_<dt>.npy hold pattern K
    python3 peer_files.py write DIR K   # writes DIR/peer.safetensors and DIR/peer_<dt>.npy of pattern K

Element i (0-based, C order) of a tensor holds pattern(i, K) in its dtype, a value every dtype
holds exactly, so both sides compare for equality. Prints one line per file and exits 1 on the
first mismatch. The safetensors files go through the safetensors package where it is installed
and through a reader of the format written here otherwise; the line says which.
"""
import json
import struct
import sys

import numpy as np
import torch

TORCH = {"f32": torch.float32, "f64": torch.float64, "f16": torch.float16,
         "bf16": torch.bfloat16, "u8": torch.uint8, "i32": torch.int32, "i64": torch.int64}
NUMPY = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "u8": np.uint8,
         "i32": np.int32, "i64": np.int64}
SHAPES = {"f32": (2, 3, 5), "f64": (7,), "f16": (1, 4, 1, 9), "bf16": (3, 1, 2, 2, 2),
          "u8": (16, 17), "i32": (5, 1, 3), "i64": (2, 2, 2, 2, 2, 2)}


def pattern(n, k, dt):
    """The values of pattern K in dtype dt as float64: small multiples of 1/4 for floats, bytes
    for u8, values past 2^32 for i64."""
    i = np.arange(n, dtype=np.int64)
    r = (i * k) % 251
    if dt == "u8":
        return r.astype(np.float64)
    s = (r - 125).astype(np.float64)
    if dt in ("i32",):
        return s * 1000003
    if dt == "i64":
        return s * 2.0 ** 33 + 7
    return s / 4


def expected(dt, k):
    shape = SHAPES[dt]
    n = int(np.prod(shape))
    return torch.from_numpy(pattern(n, k, dt)).to(TORCH[dt]).reshape(shape)


def read_safetensors(path):
    try:
        from safetensors.torch import load_file
        return load_file(path), "safetensors package"
    except ImportError:
        pass
    names = {"F32": "f32", "F64": "f64", "F16": "f16", "BF16": "bf16", "U8": "u8",
             "I32": "i32", "I64": "i64"}
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    data = blob[8 + n:]
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        lo, hi = e["data_offsets"]
        t = torch.frombuffer(bytearray(data[lo:hi]), dtype=TORCH[names[e["dtype"]]])
        out[name] = t.reshape(e["shape"])
    return out, "reader of the format"


def same(name, got, want):
    if got.dtype != want.dtype or tuple(got.shape) != tuple(want.shape):
        print(f"MISMATCH {name}: {got.dtype} {tuple(got.shape)}, expected {want.dtype} {tuple(want.shape)}")
        return False
    bad = (got.double() != want.double()).nonzero()
    if len(bad):
        at = tuple(bad[0].tolist())
        print(f"MISMATCH {name} at {at}: {got[at].item()} expected {want[at].item()}")
        return False
    return True


def check(folder, k):
    tensors, how = read_safetensors(f"{folder}/tocha.safetensors")
    ok = sorted(tensors) == sorted("t_" + dt for dt in TORCH)
    if not ok:
        print(f"MISMATCH names {sorted(tensors)}")
    for dt in TORCH:
        ok = ok and same(f"t_{dt}", tensors[f"t_{dt}"], expected(dt, k))
    print(f"safetensors read ({how}): {len(tensors)} tensors {'equal' if ok else 'DIFFER'}")
    for dt in NUMPY:
        a = np.load(f"{folder}/tocha_{dt}.npy")
        ok = ok and a.dtype == NUMPY[dt] and same(f"npy {dt}", torch.from_numpy(a), expected(dt, k))
    print(f"npy read (numpy {np.__version__}): {len(NUMPY)} files {'equal' if ok else 'DIFFER'}")
    return ok


def write(folder, k):
    tensors = {f"t_{dt}": expected(dt, k).contiguous() for dt in TORCH}
    try:
        from safetensors.torch import save_file
        save_file(tensors, f"{folder}/peer.safetensors", metadata={"from": "torch"})
        how = "safetensors package"
    except ImportError:
        header, data = {"__metadata__": {"from": "torch"}}, b""
        codes = {v: n.upper() for n, v in TORCH.items()}
        for name, t in tensors.items():
            raw = t.view(torch.uint8).numpy().tobytes() if t.dtype == torch.bfloat16 else t.numpy().tobytes()
            header[name] = {"dtype": codes[t.dtype], "shape": list(t.shape),
                            "data_offsets": [len(data), len(data) + len(raw)]}
            data += raw
        text = json.dumps(header).encode()
        text += b" " * ((8 - len(text) % 8) % 8)
        with open(f"{folder}/peer.safetensors", "wb") as f:
            f.write(struct.pack("<Q", len(text)) + text + data)
        how = "writer of the format"
    for dt in NUMPY:
        np.save(f"{folder}/peer_{dt}.npy", expected(dt, k).numpy())
    print(f"written ({how}; numpy {np.__version__})")
    return True


if __name__ == "__main__":
    mode, folder, k = sys.argv[1], sys.argv[2], int(sys.argv[3])
    sys.exit(0 if (check if mode == "check" else write)(folder, k) else 1)
