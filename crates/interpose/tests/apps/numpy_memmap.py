"""numpy.memmap, run plainly and under `pagepilot run`: a ~32 MB float32
file made by the program (mode w+), then passes that read it through one
read-only mapping kept open (mode r) while another writes it in place
(mode r+, flushed), and a copy-on-write mapping (mode c) whose changes
must never reach the file. Sums are printed with full precision.

    python3 numpy_memmap.py FILE
"""
import sys

import numpy as np

path = sys.argv[1]
N = 8 << 20  # float32s: 32 MiB
CHUNK = 1 << 20

w = np.memmap(path, dtype=np.float32, mode="w+", shape=(N,))
for lo in range(0, N, CHUNK):
    i = np.arange(lo, lo + CHUNK, dtype=np.int64)
    w[lo : lo + CHUNK] = (i * 2654435761 % 1000003).astype(np.float32) / 1024
w.flush()
del w


def total(m):
    return float(np.sum(m, dtype=np.float64))


r = np.memmap(path, dtype=np.float32, mode="r")
print("made", repr(total(r)))
for p in range(3):
    w = np.memmap(path, dtype=np.float32, mode="r+")
    for lo in range(0, N, CHUNK):
        w[lo : lo + CHUNK] *= 0.75
        w[lo : lo + CHUNK] += p
    # One store in every page, from the end back.
    w[N - 1 :: -1024 - 256 * p] = p + 0.5
    print("pass", p, "writer", repr(total(w)), "reader before flush", repr(total(r)))
    w.flush()
    del w
    print("pass", p, "reader", repr(total(r)), "max", repr(float(r.max())))

c = np.memmap(path, dtype=np.float32, mode="c")
c[::2] = -1.0
print("copy-on-write", repr(total(c)), "file", repr(total(r)))
del c
print("last", repr(total(r)), repr(float(r[0])), repr(float(r[N // 2])), repr(float(r[-1])))
