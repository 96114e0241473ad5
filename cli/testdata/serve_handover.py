"""Test trainer for the serve sink's hand-over: reads STOP batches (all when
STOP is 0) with clients/python's client and leaves, and prints the labels it
read as JSON, one list per epoch it saw begin. It leaves through
Stream.close(), or with --dataset through a torch DataLoader over
PiperunDataset that it never closes: the client closes it at exit. With
--loader-per-epoch N it reads N epochs, each through a new DataLoader over a
new PiperunDataset, dropping the one before; with --for-dataset N, each in a
for loop over a new PiperunDataset; with --break-early N, two batches of the
first, a loop left early, then N-1 whole epochs; with --past-the-end N, N
epochs through one DataLoader, and the warnings the client gave. --resume-to
FILE writes the hello's "resume" to FILE as JSON (with connect)."""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "clients", "python"))
from piperun_client import connect  # noqa: E402

address, stop = sys.argv[1], int(sys.argv[2])
epochs, n = [], 0


def read(epoch_iters):
    global n
    for epoch in epoch_iters:
        epochs.append([])
        for b in epoch:
            epochs[-1].extend(int(x) for x in b["label"])
            n += 1
            if n == stop:
                return


if "--past-the-end" in sys.argv:
    # One epoch more than the spec's, through one DataLoader: the last is
    # empty, with a warning, which is printed after the epochs.
    import warnings

    import torch.utils.data
    from piperun_client import PiperunDataset

    loader = torch.utils.data.DataLoader(PiperunDataset(address), batch_size=None)
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        for _ in range(int(sys.argv[sys.argv.index("--past-the-end") + 1])):
            epochs.append([int(x) for b in loader for x in b["label"]])
    print(json.dumps(epochs))
    # Each with the file it points at: the loop's, not torch's.
    print(json.dumps(["%s: %s" % (os.path.basename(w.filename), w.message) for w in said]))
    sys.stdout.flush()
elif "--break-early" in sys.argv:
    # Two batches of the first epoch, then a loop left early, then whole
    # epochs: each must be an epoch, not the rest of the one left.
    import torch.utils.data
    from piperun_client import PiperunDataset

    loader = torch.utils.data.DataLoader(PiperunDataset(address), batch_size=None)
    epochs.append([])
    for i, b in enumerate(loader):
        epochs[-1].extend(int(x) for x in b["label"])
        if i == 1:
            break
    for _ in range(int(sys.argv[sys.argv.index("--break-early") + 1]) - 1):
        epochs.append([int(x) for b in loader for x in b["label"]])
    print(json.dumps(epochs))
    sys.stdout.flush()
elif "--for-dataset" in sys.argv:
    # `for b in PiperunDataset(...)`, a new one per epoch: the loop keeps
    # only the iterator.
    from piperun_client import PiperunDataset

    for _ in range(int(sys.argv[sys.argv.index("--for-dataset") + 1])):
        epochs.append([int(x) for b in PiperunDataset(address, wait=5) for x in b["label"]])
    print(json.dumps(epochs))
    sys.stdout.flush()
elif "--loader-per-epoch" in sys.argv:
    # A new DataLoader over a new PiperunDataset for every epoch, as a
    # training function called once per epoch makes; the one before is
    # never closed, only dropped.
    import torch.utils.data
    from piperun_client import PiperunDataset

    for _ in range(int(sys.argv[sys.argv.index("--loader-per-epoch") + 1])):
        loader = torch.utils.data.DataLoader(PiperunDataset(address, wait=5), batch_size=None)
        epochs.append([int(x) for b in loader for x in b["label"]])
    print(json.dumps(epochs))
    sys.stdout.flush()
elif "--dataset" in sys.argv:
    import torch.utils.data
    from piperun_client import PiperunDataset

    ds = PiperunDataset(address)
    loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=0)

    # An epoch at a time, as a training loop reads them; stop part-way.
    def epochs_of_loader():
        while True:
            batches = iter(loader)
            first = next(batches, None)
            if first is None:
                return

            def epoch(first=first, batches=batches):
                yield first
                yield from batches
            yield epoch()

    read(epochs_of_loader())
    print(json.dumps(epochs))
    sys.stdout.flush()
    # No close: the script ends with the stream open.
else:
    s = connect(address)
    if "--resume-to" in sys.argv:
        with open(sys.argv[sys.argv.index("--resume-to") + 1], "w") as f:
            json.dump(s.hello.get("resume"), f)
    try:
        read(s.epochs())
    finally:
        s.close()
    print(json.dumps(epochs))
