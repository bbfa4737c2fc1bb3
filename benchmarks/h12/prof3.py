"""Profile helper (h12): prepare only, malani-like."""

import cProfile
import hashlib
import pstats
import random
import sys
import time

from node.routing import registry
from node.topology import Topology

topo = Topology.parse(sys.argv[1])
algs = sys.argv[2].split(",")
rng = random.Random(1)
nodes = [n for n in topo.nodes() if n != (0, 0)]
sets = [rng.sample(nodes, k) for k in range(20, 400, 20) for _ in range(3)]
h = hashlib.sha256()
pr = cProfile.Profile(time.process_time)
prof = len(sys.argv) > 3
if prof:
    pr.enable()
c0 = time.process_time()
for a in algs:
    alg = registry.get(a)
    for s in sets:
        h.update(repr(alg.prepare(topo, (0, 0), s, {})).encode())
c = time.process_time() - c0
if prof:
    pr.disable()
    pstats.Stats(pr).sort_stats("tottime").print_stats(25)
print(f"prepare {len(sets) * len(algs)}: cpu {c:.2f}s digest {h.hexdigest()[:16]}")
