"""Test trainer for the serve sink's hand-over: reads STOP batches (all when
STOP is 0) with clients/python's client, leaves through Stream.close(), and
prints the labels it read as JSON, one list per epoch it saw begin."""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "clients", "python"))
from piperun_client import connect  # noqa: E402

address, stop = sys.argv[1], int(sys.argv[2])
epochs, n = [], 0
s = connect(address)
try:
    for epoch in s.epochs():
        epochs.append([])
        for b in epoch:
            epochs[-1].extend(int(x) for x in b["label"])
            n += 1
            if n == stop:
                break
        if n == stop:
            break
finally:
    s.close()
print(json.dumps(epochs))
