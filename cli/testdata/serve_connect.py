"""Test trainer for the client's connect: connects to argv[1], with
hello_wait argv[2] (seconds, or "none"), reads one sample if argv[3] is
"read", and prints what became of it as one JSON object: the hello (and
the sample's field names), or the exception's class and message."""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "clients", "python"))
from piperun_client import connect  # noqa: E402

hello_wait = None if sys.argv[2] == "none" else float(sys.argv[2])
try:
    with connect(sys.argv[1], hello_wait=hello_wait) as s:
        out = {"hello": s.hello}
        if sys.argv[3:] == ["read"]:
            out["fields"] = sorted(next(iter(s.samples())))
except Exception as e:  # noqa: BLE001 (what the user would see)
    out = {"type": type(e).__name__, "error": str(e)}
print(json.dumps(out, sort_keys=True))
