#!/usr/bin/env python3
"""libCacheSim's side of `pagepilot bench sim --against libcachesim`.

Reads one job as JSON on stdin:

    {"trace": "PATH.oracleGeneral",
     "runs": [{"name": "lru", "policy": "LRU", "size": 32768,
               "params": {}}, ...]}

and for each run, in order, opens the trace with libCacheSim's C reader,
builds the cache and runs `process_trace`, timing the three together (trace
loading included, as on pagepilot's side). Objects have size 1, one per
page, so a cache of `size` bytes holds `size` pages. Prints one JSON object:

    {"version": "0.3.5",
     "runs": [{"name": ..., "seconds": ..., "requests": ..., "misses": ...}]}

`misses` counts every miss, first accesses included (libCacheSim's miss
ratio times the requests, which it counts from the reader).
"""

import json
import sys
import time

import libcachesim as lcs

POLICIES = {
    "LRU": lcs.LRU,
    "FIFO": lcs.FIFO,
    "Clock": lcs.Clock,
    "ARC": lcs.ARC,
    "S3FIFO": lcs.S3FIFO,
    "Sieve": lcs.Sieve,
    "Belady": lcs.Belady,
}


def run_one(trace, run):
    start = time.perf_counter()
    reader = lcs.TraceReader(trace, lcs.TraceType.ORACLE_GENERAL_TRACE)
    cache = POLICIES[run["policy"]](run["size"], **run.get("params", {}))
    miss_ratio, _ = cache.process_trace(reader)
    seconds = time.perf_counter() - start
    requests = reader.n_total_req
    return {
        "name": run["name"],
        "seconds": seconds,
        "requests": requests,
        "misses": round(miss_ratio * requests),
    }


def main():
    job = json.load(sys.stdin)
    out = [run_one(job["trace"], run) for run in job["runs"]]
    json.dump({"version": getattr(lcs, "__version__", "unknown"), "runs": out}, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
