"""LMDB through the `lmdb` package, run plainly and under `pagepilot run`:
~16 MB of records (a ~40 MB file) put in batches (some overwritten, some deleted), random
gets and a cursor scan, each printed as a checksum. LMDB maps its data
file whole: read-only by default (it writes with pwrite), or read-write
with --writemap (it writes through the mapping and msyncs).

    python3 lmdb_store.py DIR [--writemap]
"""
import hashlib
import random
import sys

import lmdb

RECORDS = 40_000
writemap = "--writemap" in sys.argv[2:]
env = lmdb.open(sys.argv[1], map_size=64 << 20, writemap=writemap, subdir=True, lock=True)


def key(i):
    return b"key-%08d" % (i * 7919 % RECORDS)


def value(i, gen):
    # ~300 bytes, different for every record and generation.
    return (b"%d:%d|" % (i, gen)) * 30


for lo in range(0, RECORDS, 10_000):
    with env.begin(write=True) as txn:
        for i in range(lo, lo + 10_000):
            txn.put(key(i), value(i, 0)[:300])
with env.begin(write=True) as txn:
    for i in range(0, RECORDS, 3):
        txn.put(key(i), value(i, 1)[: 200 + i % 200])
    for i in range(1, RECORDS, 10):
        txn.delete(key(i))

rng = random.Random(20240611)
h = hashlib.sha256()
found = 0
with env.begin() as txn:
    for _ in range(50_000):
        i = rng.randrange(RECORDS)
        v = txn.get(key(i))
        if v is not None:
            found += 1
            h.update(v)
print("gets", found, h.hexdigest())

h = hashlib.sha256()
n = 0
with env.begin() as txn:
    for k, v in txn.cursor():
        h.update(k)
        h.update(v)
        n += 1
print("scan", n, h.hexdigest())
print("entries", env.stat()["entries"], "depth", env.stat()["depth"])
env.close()
