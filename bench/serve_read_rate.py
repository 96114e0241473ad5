#!/usr/bin/env python3
"""Reads a serve sink's stream with clients/python's client to the end and
prints the rate from the first sample to the end of stream as JSON: what a
PyTorch trainer's loop can take from piperun (serve.BenchmarkPythonClient
runs it)."""
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "clients", "python"))
from piperun_client import connect  # noqa: E402

torch = "--torch" in sys.argv
with connect(sys.argv[1], torch=torch) as s:
    n = nbytes = 0
    t0 = None
    for batch in s.samples():
        if t0 is None:
            t0 = time.perf_counter()
        n += 1
        nbytes += sum(v.nbytes if hasattr(v, "nbytes") else v.element_size() * v.nelement() for v in batch.values() if hasattr(v, "shape"))
    dt = time.perf_counter() - t0 if t0 else 0
print(json.dumps({"batches": n, "bytes": nbytes, "seconds": dt,
                  "batches_per_s": (n - 1) / dt if dt else 0, "mb_per_s": nbytes / dt / 1e6 if dt else 0}))
