"""Test trainer for the client's connect: connects to argv[1], with
hello_wait argv[2] (seconds, or "none"), and prints what became of it as
one JSON object: the hello, or the exception's class and message."""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "clients", "python"))
from piperun_client import connect  # noqa: E402

hello_wait = None if sys.argv[2] == "none" else float(sys.argv[2])
try:
    with connect(sys.argv[1], hello_wait=hello_wait) as s:
        out = {"hello": s.hello}
except Exception as e:  # noqa: BLE001 (what the user would see)
    out = {"type": type(e).__name__, "error": str(e)}
print(json.dumps(out, sort_keys=True))
