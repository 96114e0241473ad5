"""Test trainer for the serve sink: connects with clients/python's client,
reads the whole stream and prints what it got as one JSON object."""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "clients", "python"))
from piperun_client import connect, StreamCut  # noqa: E402

use_torch = "--torch" in sys.argv
out = {"epochs": []}
try:
    with connect(sys.argv[1], torch=use_torch) as s:
        out["hello"] = s.hello
        for epoch in s.epochs():
            batches = []
            for b in epoch:
                row = {}
                for k, v in sorted(b.items()):
                    if hasattr(v, "shape"):
                        row[k] = {"type": str(v.dtype), "shape": list(v.shape), "values": v.reshape(-1).tolist()}
                    elif isinstance(v, bytes):
                        row[k] = {"type": "bytes", "values": list(v)}
                    else:
                        row[k] = {"type": type(v).__name__, "values": v}
                batches.append(row)
            out["epochs"].append({"batches": batches, "end": s.epoch if s.end is None else None})
        out["end"] = s.end
except StreamCut as e:
    out["cut"] = str(e)
except RuntimeError as e:  # a protocol error
    out["error"] = str(e)
print(json.dumps(out, sort_keys=True))
