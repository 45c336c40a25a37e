#!/usr/bin/env python3
"""compare_flight.py DIR_A DIR_B: the collective traces of two runs of the same job (the twin's and a
GPU run's flight dumps, flight_rank*.txt written with TWINRUN_FLIGHT_AT_EXIT=1) must be identical
rank by rank: for every record in order, the communicator (name and members), sequence number, op,
count, dtype, reduction and peer. Times, uids and states are not compared (clocks differ; uids come
from the twin's hash and NCCL's unique id). Exits 1 at the first difference, printing it."""
import glob
import os
import sys


def load(d):
    out = {}
    for path in sorted(glob.glob(os.path.join(d, "flight_rank*.txt"))):
        comms, recs, rank, dropped = {}, [], None, None
        for line in open(path):
            w = line.split()
            if not w or w[0].startswith("#"):
                continue
            if w[0] == "rank":
                rank = int(w[1])
            elif w[0] == "comm":
                comms[w[1]] = (w[5], w[9])  # name, ranks
            elif w[0] == "rec":
                f = dict(zip(w[2::2], w[3::2]))
                recs.append((comms[f["comm"]], int(f["seq"]), f["op"], int(f["count"]), f["dtype"], f["redop"],
                             int(f["peer"])))
            elif w[0] == "dropped":
                dropped = int(w[1])
        if dropped:
            sys.exit(f"{path}: the ring dropped {dropped} records: raise TWINRUN_FLIGHT_RECORDS")
        out[rank] = recs
    return out


a, b = load(sys.argv[1]), load(sys.argv[2])
if not a or sorted(a) != sorted(b):
    sys.exit(f"compare_flight: ranks differ: {sorted(a)} in {sys.argv[1]}, {sorted(b)} in {sys.argv[2]}")
total = 0
for r in sorted(a):
    ra, rb = a[r], b[r]
    for i, (x, y) in enumerate(zip(ra, rb)):
        if x != y:
            sys.exit(f"compare_flight: rank {r} record {i} differs:\n  {x}\n  {y}")
    if len(ra) != len(rb):
        sys.exit(f"compare_flight: rank {r} has {len(ra)} records in one run, {len(rb)} in the other")
    total += len(ra)
print(f"compare_flight: {len(a)} ranks, {total} collectives, identical (group, sequence, op, count, dtype, "
      f"reduction, peer)")
