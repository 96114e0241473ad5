"""Client for piperun's serve sink: read the samples (batches) a
`piperun apply` run streams over a Unix or TCP socket, as NumPy arrays or
PyTorch tensors.

    from piperun_client import connect
    with connect("unix:///tmp/piperun.sock") as stream:
        for epoch in stream.epochs():
            for batch in epoch:              # dict: field name -> value
                images = batch["image"]      # numpy.ndarray, e.g. (32, 224, 224, 3) float32
                labels = batch["label"]

    # or, for a DataLoader (batch_size=None: piperun batches already)
    from piperun_client import PiperunDataset
    loader = torch.utils.data.DataLoader(PiperunDataset("unix:///tmp/piperun.sock"), batch_size=None)

The wire format is documented in the Go package github.com/piperun/piperun/serve.
Only the standard library and NumPy are needed; PyTorch only for PiperunDataset.
"""
import base64
import json
import os
import selectors
import socket
import struct
import sys
import time
import warnings
import weakref

import numpy as np

MAGIC = b"PRN1"
CLIENT_HELLO = b"PRN1"   # sent first: the server serves only connections that greet it
MAX_HEADER = 64 << 20
MAX_PAYLOAD = 16 << 30
TRUST_PAYLOAD = 64 << 20  # allocated up front; beyond it, grown as bytes arrive
PROTOCOL = 2
_ACK = struct.Struct("<Q")
HELLO, SAMPLE, END_OF_EPOCH, END_OF_STREAM = 1, 2, 3, 4
_HEAD = struct.Struct("<4sB3xIQ")
_DTYPES = {"uint8": np.uint8, "int32": np.int32, "int64": np.int64,
           "float32": np.float32, "float64": np.float64}


# _RESET says what a reset connection means: piperun does not reset a
# trainer it serves, so the run is over, one way or another.
_RESET = ("piperun reset the connection: the run failed, was interrupted or killed, or ended "
          "while another trainer was being served")


class _NotAFrame(RuntimeError):
    """Bytes that do not start a piperun frame, in head."""

    def __init__(self, head):
        super().__init__("not a piperun frame: starts with %r" % head[:4])
        self.head = head


class StreamCut(RuntimeError):
    """The stream stopped before its end-of-stream frame: the run failed or
    was interrupted (piperun's log says why)."""


def _open_once(address):
    scheme, sep, rest = address.partition("://")
    if not sep:
        raise ValueError("%r: want unix:///path/to.sock or tcp://host:port" % address)
    if scheme == "unix":
        if not rest:
            raise ValueError("%r: want unix:///path/to.sock, with a path" % address)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(rest)
        except OSError:
            s.close()
            raise
        return s
    if scheme == "tcp":
        host, sep, port = rest.rpartition(":")
        if not sep or not (port.isascii() and port.isdigit()) or int(port) > 65535:
            raise ValueError("%r: want tcp://host:port, with a port number from 0 to 65535" % address)
        host = host.strip("[]")
        try:
            s = socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT)
        except socket.gaierror as e:
            raise ConnectionError("%s: cannot find host %r" % (address, host)) from e
        except TimeoutError as e:
            raise _NoAnswer("no answer from %s in %g s: a firewall dropping packets, a host that is down, "
                            "or a listener that accepts nothing" % (address, CONNECT_TIMEOUT)) from e
        s.settimeout(None)
        # Acknowledgements are 8 bytes each: Nagle's algorithm would hold
        # them back while frames stream in, and a trainer that then leaves
        # takes them along, so the next would be sent its batches again.
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return s
    raise ValueError("%r: scheme %r is not unix or tcp" % (address, scheme))


# CONNECT_TIMEOUT bounds one TCP connect: one that gets no answer (a
# firewall dropping packets) otherwise waits out the kernel's retries,
# about two minutes, whatever hello_wait says.
CONNECT_TIMEOUT = 10.0


def _relative(address):
    """Says where a relative socket path points, for a connect that found
    nothing there: piperun resolves its listen path against the spec's
    directory, this client against the current one, and unix://tmp/x.sock
    is the relative tmp/x.sock, not /tmp/x.sock."""
    scheme, _, path = address.partition("://")
    if scheme != "unix" or not path or os.path.isabs(path):
        return ""
    return ("; %s is a relative path, here %s (piperun resolves a relative listen path against its spec's "
            "directory; unix:///%s is absolute)" % (path, os.path.abspath(path), path))


class _NoAnswer(ConnectionError):
    """A TCP connect that got no answer in CONNECT_TIMEOUT."""


# CLOSE_WAIT bounds how long close() reads on after sending its last
# acknowledgements, for piperun to close first (Stream.close).
CLOSE_WAIT = 2.0

# WAIT_NOTICE is how long a connect waits in silence before it says, once,
# on stderr, that it is waiting: a client started after the run ended
# otherwise looks hung for its whole wait (found by a new-user test).
WAIT_NOTICE = 2.0


def _open(address, wait):
    """Connects, retrying for up to wait seconds while nothing listens yet
    (a trainer started before piperun apply)."""
    start = time.monotonic()
    deadline = start + wait
    told = False
    while True:
        try:
            return _open_once(address)
        except (FileNotFoundError, ConnectionRefusedError, _NoAnswer) as e:
            now = time.monotonic()
            if now >= deadline and isinstance(e, _NoAnswer):
                if wait == 0:
                    raise
                raise ConnectionError("%s; tried until the wait of %g s was spent" % (e, wait)) from e
            if now >= deadline:
                raise ConnectionError("nothing serves at %s (start piperun apply with a serve sink there%s)%s"
                                      % (address, ", or give connect or PiperunDataset a wait" if wait == 0 else "",
                                         _relative(address))) from e
            if not told and now - start >= WAIT_NOTICE:
                told = True
                left = deadline - now
                sys.stderr.write("piperun_client: nothing serves at %s yet; waiting up to %s s more for piperun apply "
                                 "(a run that has already ended serves nothing)\n"
                                 % (address, "%.0f" % left if left >= 10 else "%.1f" % left))
                sys.stderr.flush()
            time.sleep(0.1)


def _untag(v):
    """A list's JSON back to values: {"b64": ...} is bytes, {"f": ...} a
    NaN or infinite float (what JSON cannot hold)."""
    if isinstance(v, list):
        return [_untag(e) for e in v]
    if isinstance(v, dict) and len(v) == 1:
        if "b64" in v:
            return base64.b64decode(v["b64"])
        if "f" in v:
            return float(v["f"])
    return v


# _LEFT_BETWEEN_EPOCHS maps an address to the epoch a stream of this
# process that left it between epochs would have read next.
_LEFT_BETWEEN_EPOCHS = {}


class Stream:
    """One connection to a serve sink. Iterate epochs() for one iterator per
    epoch, or samples() for every sample of every epoch."""

    def __init__(self, address, torch=False, wait=0.0, hello_wait=None):
        self._address = address
        self._sock = _open(address, wait)
        try:
            self._sock.sendall(CLIENT_HELLO)
            start = time.monotonic()
            self._await_hello(address, hello_wait)
            if hello_wait is not None:
                # The rest of the hello within what is left of the wait: a
                # program that sends a few bytes and falls silent hung here.
                self._sock.settimeout(max(0.001, hello_wait - (time.monotonic() - start)))
            self._file = self._sock.makefile("rb", buffering=1 << 20)
            self._torch = torch
            self.epoch = None          # the last end-of-epoch header
            self.end = None            # the end-of-stream header, once read
            self._nread = 0            # frames read after the hello, acknowledged
            try:
                kind, header, _ = self._frame()
                self._sock.settimeout(None)
            except socket.timeout as e:
                raise self._no_hello(address, hello_wait) from e
            except StreamCut as e:
                raise ConnectionError("the connection to %s ended before piperun's hello: the run ended or failed "
                                      "before it served this trainer, or %s is not a piperun serve sink"
                                      % (address, address)) from e
            except _NotAFrame as e:
                raise ConnectionError("%s is not a piperun serve sink: it answered %r" % (address, e.head)) from e
            if kind != HELLO:
                raise RuntimeError("%s: first frame is of kind %d, not hello" % (address, kind))
            if header.get("protocol") != PROTOCOL:
                raise RuntimeError("%s serves protocol %s; this client speaks %d (use the client of the same piperun version)"
                                   % (address, header.get("protocol"), PROTOCOL))
        except BaseException:
            # The socket stays open while its makefile does, and a notebook
            # keeps this half-built stream alive through the traceback: a
            # connection left open would be served, and hold up the next
            # trainer.
            f = getattr(self, "_file", None)
            if f is not None:
                f.close()
            self._sock.close()
            raise
        self.hello = header
        r = header.get("resume") or {}
        # Where this stream stands, to tell a later one of this process
        # that it goes on from here (see close).
        self._next_epoch = r.get("epoch", 0)
        self._between_epochs = not r.get("frames")
        own = _LEFT_BETWEEN_EPOCHS.pop(address, None)
        goes_on = not r.get("frames") and own == r.get("epoch")
        if (r.get("epoch") or r.get("frames")) and not goes_on:
            # A run left waiting by a trainer that died serves the next
            # one to connect, which may have meant to start afresh.
            at = "at the start of epoch %d" % r.get("epoch", 0)  # the earlier ones were read
            if r.get("frames"):
                n = r["frames"]
                at = "at epoch %d, after the %s a trainer before it read" % (r.get("epoch", 0), "frame" if n == 1 else "%d frames" % n)
            sys.stderr.write("piperun_client: %s serves a run already under way: this trainer takes it over %s "
                             "(a new run of piperun apply starts at the beginning)\n" % (address, at))
            sys.stderr.flush()

    def _await_hello(self, address, hello_wait):
        """Waits for the hello: piperun greets one trainer at a time, and
        the next waits, without a word, until the one before leaves. Say
        so, once; and give up after hello_wait seconds, if given (a program
        that is not piperun may never answer)."""
        # A selector, not select.select, which fails on a descriptor past
        # 1023 (a process with many files open).
        with selectors.DefaultSelector() as sel:
            sel.register(self._sock, selectors.EVENT_READ)
            first = WAIT_NOTICE if hello_wait is None else min(WAIT_NOTICE, hello_wait)
            if sel.select(first):
                return
            if hello_wait is None or hello_wait > first:
                sys.stderr.write("piperun_client: connected to %s, no hello yet: piperun is preparing its first sample, "
                                 "or serving another trainer (one at a time: another stream or PiperunDataset of this "
                                 "process still open?), or this is not a piperun serve sink\n" % address)
                sys.stderr.flush()
                if sel.select(None if hello_wait is None else hello_wait - first):
                    return
        raise self._no_hello(address, hello_wait)

    @staticmethod
    def _no_hello(address, hello_wait):
        return TimeoutError("no hello from %s in %g s (hello_wait): piperun is still preparing its first sample, or "
                            "serving another trainer, or %s is not a piperun serve sink" % (address, hello_wait, address))

    def _read(self, n):
        # Trust the length up to TRUST_PAYLOAD; beyond it, grow as the bytes
        # arrive, so a corrupt length costs only what was really sent.
        buf = bytearray(min(n, TRUST_PAYLOAD))
        got = 0
        while got < n:
            if got == len(buf):
                buf.extend(bytes(min(n - got, got)))  # double, up to the length
            with memoryview(buf) as view:
                try:
                    k = self._file.readinto(view[got:])
                except ConnectionResetError as e:
                    raise StreamCut(_RESET) from e
            if not k:
                raise StreamCut("the stream ended before its end-of-stream frame "
                                "(after %d of %d bytes of a frame): the run failed or was interrupted" % (got, n))
            got += k
        return buf

    def _ack(self):
        """Tells piperun one more frame was read: only acknowledged frames
        count as delivered, and those a trainer that leaves did not
        acknowledge go to the next one."""
        self._nread += 1
        try:
            self._sock.sendall(_ACK.pack(self._nread))
        except OSError:
            pass  # the next read says what became of the connection

    def _frame(self):
        try:
            head = self._file.read(_HEAD.size)
        except ConnectionResetError as e:
            raise StreamCut(_RESET) from e
        if len(head) < _HEAD.size:
            raise StreamCut("the stream ended before its end-of-stream frame: the run failed or was interrupted")
        magic, kind, hlen, plen = _HEAD.unpack(head)
        if magic != MAGIC:
            # What else came already, up to a line's worth, says what
            # answered (an HTTP server's status line); a peek that would
            # wait for more gives up at once.
            more = b""
            try:
                self._sock.settimeout(0.05)
                more = self._file.peek(64)[:64 - len(head)]
            except OSError:
                pass
            raise _NotAFrame(head + more)
        if kind < HELLO or kind > END_OF_STREAM:
            raise RuntimeError("unknown frame kind %d" % kind)
        if hlen > MAX_HEADER:
            raise RuntimeError("frame header of %d bytes is over the limit of %d" % (hlen, MAX_HEADER))
        if plen > MAX_PAYLOAD:
            raise RuntimeError("frame payload of %d bytes is over the limit of %d" % (plen, MAX_PAYLOAD))
        raw = bytes(self._read(hlen)) if hlen else b"{}"
        try:
            header = json.loads(raw)
        except ValueError as e:
            raise RuntimeError("%s: a frame's header is not JSON (%s): %r; is this client the one of the same "
                               "piperun version?" % (self._address, e, raw[:64])) from e
        payload = self._read(plen) if plen else bytearray()
        if kind != HELLO:
            self._ack()
        return kind, header, payload

    def _decode(self, header, payload):
        try:
            return self._fields(header, payload)
        except (KeyError, ValueError, TypeError, AttributeError) as e:
            # A frame this client cannot read, from a piperun of another
            # version or a peer that is none: say so, not numpy's words.
            raise RuntimeError("%s: a sample frame does not decode (%s: %s); is this client the one of the same "
                               "piperun version?" % (self._address, type(e).__name__, e)) from e

    def _fields(self, header, payload):
        out = {}
        for f in header["fields"]:
            dt = f.get("dtype")
            if "value" in f:  # scalars, strings and lists travel in the header
                v = f.get("value")
                if dt == "float64":
                    v = float(v)  # JSON writes 2.0 as 2, NaN as "NaN"
                elif dt == "bytes_list":
                    v = [base64.b64decode(e) for e in v]
                elif dt == "list":
                    v = _untag(v)
                out[f["name"]] = v
                continue
            off, n = f.get("offset", 0), f.get("nbytes", 0)
            if dt == "bytes":
                out[f["name"]] = bytes(payload[off:off + n])
                continue
            a = np.frombuffer(payload, dtype=_DTYPES[dt], count=n // np.dtype(_DTYPES[dt]).itemsize, offset=off)
            a = a.reshape(f.get("shape", []))
            if self._torch:
                import torch
                a = torch.from_numpy(a)
            out[f["name"]] = a
        return out

    def _epoch(self, first):
        kind, header, payload = first
        while True:
            if kind == SAMPLE:
                self._between_epochs = False
                yield self._decode(header, payload)
            elif kind == END_OF_EPOCH:
                self.epoch = header
                self._next_epoch += 1
                self._between_epochs = True
                return
            elif kind == END_OF_STREAM:
                self.end = header
                return
            else:
                raise RuntimeError("unexpected frame of kind %d" % kind)
            kind, header, payload = self._frame()

    def epochs(self):
        """Yields one iterator per epoch, until the end of the stream."""
        while self.end is None:
            # Read ahead to the epoch's first frame: the end of the stream
            # after the last epoch is no epoch of its own.
            first = self._frame()
            if first[0] == END_OF_STREAM:
                self.end = first[1]
                return
            it = self._epoch(first)
            yield it
            for _ in it:  # an epoch the caller left early is read to its end
                pass

    def samples(self):
        """Every sample of every epoch."""
        for epoch in self.epochs():
            yield from epoch

    def close(self):
        """Leaves the stream. Frames read so far stay delivered; the rest go
        to the next trainer to connect."""
        # A stream of this process that leaves between epochs is followed
        # by one that goes on with the next, when a script makes a dataset
        # per epoch: that one is told nothing. A run found under way at a
        # script's start, or where a stream of this process left mid-epoch,
        # is still worth a word.
        if self._between_epochs:
            _LEFT_BETWEEN_EPOCHS[self._address] = self._next_epoch
        else:
            _LEFT_BETWEEN_EPOCHS.pop(self._address, None)
        try:
            # Closing a socket that holds unread frames resets it, and the
            # reset throws away what the kernel has not sent yet, our last
            # acknowledgements among them (on a busy machine, dozens): so
            # shut the write side, which sends them and then the end, and
            # read on, dropping frames, until piperun has read that end and
            # closes its side (at its next frame, or at once while it waits
            # for acknowledgements).
            self._sock.shutdown(socket.SHUT_WR)
            deadline = time.monotonic() + CLOSE_WAIT
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._sock.settimeout(left)
                if not self._sock.recv(1 << 16):
                    break
        except OSError:
            pass  # gone already, or the wait ran out (socket.timeout)
        finally:  # a Ctrl-C in the wait closes too
            self._file.close()
            self._sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def connect(address, torch=False, wait=0.0, hello_wait=None):
    """Connects to a serve sink (unix:///path or tcp://host:port) and reads
    its hello. torch=True gives torch tensors instead of NumPy arrays; wait
    is how many seconds to keep trying while nothing serves there yet.
    One trainer is served at a time: a second waits until the first leaves,
    for as long as that takes, or hello_wait seconds if given (then
    TimeoutError)."""
    return Stream(address, torch=torch, wait=wait, hello_wait=hello_wait)


def _callers_level():
    """The stacklevel of warnings.warn, called by the function that calls
    this, that points at the first frame outside this module and torch:
    the training loop's line, not a DataLoader's fetch."""
    level, f = 1, sys._getframe(1)
    while f is not None:
        name = f.f_globals.get("__name__", "")
        if name != __name__ and name != "torch" and not name.startswith("torch."):
            return level
        level, f = level + 1, f.f_back
    return 2


try:
    import torch.utils.data as _tud

    class PiperunDataset(_tud.IterableDataset):
        """One epoch of a serve sink's stream per iteration, as torch tensors.
        Use it with DataLoader(..., batch_size=None, num_workers=0): piperun
        already batches, shuffles and prefetches on every core."""

        def __init__(self, address, wait=60.0, hello_wait=None):
            super().__init__()
            self.address = address
            self.wait = wait
            self.hello_wait = hello_wait
            self._stream = None
            self._epochs = None
            self._empty = 0  # empty epochs given past the stream's end

        def __iter__(self):
            if _tud.get_worker_info() is not None:
                raise RuntimeError("PiperunDataset is one stream: use it with DataLoader(num_workers=0); "
                                   "piperun already decodes and batches on every core")
            if self._stream is None:
                self._stream = connect(self.address, torch=True, wait=self.wait, hello_wait=self.hello_wait)
                self._epochs = self._stream.epochs()
                # A training script rarely closes its dataset: leave through
                # close() when the dataset goes (a new one made for the
                # next epoch would otherwise wait on this one's open
                # connection for ever) or at exit, so that the last
                # acknowledgements are not lost.
                self._close = weakref.finalize(self, self._stream.close)
            epoch = next(self._epochs, None)
            if epoch is None:
                # An empty epoch, not an error: a loop may read until one
                # comes. But a loop of more epochs than the spec's would
                # go on without data, and without a word. An endless spec
                # (epochs: 0) ended by a take has no count to keep to: its
                # first empty epoch is how a loop learns of the end, and a
                # second says the loop did not stop there.
                n = self._stream.hello.get("epochs")
                self._empty += 1
                if n:
                    warnings.warn("piperun_client: the stream from %s has ended: its %d epochs were read, so this "
                                  "epoch is empty (an epoch left early, such as a next(iter(loader)) to look at the "
                                  "shapes, counts as read)" % (self.address, n), stacklevel=_callers_level())
                elif self._empty == 2:
                    warnings.warn("piperun_client: the stream from %s has ended (its spec is endless, and a take "
                                  "ended it), so this epoch is empty, as was the one before: stop at the first "
                                  "empty epoch" % self.address, stacklevel=_callers_level())
                epoch = iter(())
            return self._holding(epoch)

        def _holding(self, epoch):
            # Holds the dataset while its epoch is read: `for b in
            # PiperunDataset(...)` keeps only this iterator, and the
            # dataset's finalizer would close the stream under it. Not
            # `yield from`: closing this generator (a loop left early)
            # would close the epoch's too, and the stream could not read
            # the rest of the epoch, shifting every later one.
            for sample in epoch:
                yield sample

        @property
        def hello(self):
            """The serve sink's hello once the first iteration connected
            (None before): its pipeline, seed and epochs, and for a trainer
            that takes over from one that left, where it starts: "resume",
            {"epoch": E, "frames": N} after N frames of epoch E."""
            return None if self._stream is None else self._stream.hello

        def close(self):
            """Leaves the stream (see Stream.close)."""
            if self._stream is not None:
                self._close()
except ImportError:  # NumPy users need no torch
    pass
