// Package serve is the wire format of the serve sink, which streams samples
// (usually batches) from a piperun run to a trainer process over a Unix or
// TCP socket, and a Go client for it. The Python client is
// clients/python/piperun_client.py.
//
// A stream is a sequence of frames. Each frame is a 20-byte head, a JSON
// header and a payload:
//
//	magic   [4]byte  "PRN1"
//	kind    uint8    1 hello, 2 sample, 3 end of epoch, 4 end of stream
//	pad     [3]byte  zero
//	header  uint32   length of the JSON header, little-endian
//	payload uint64   length of the payload, little-endian
//
// A sample's header lists its fields in name order. Tensors and bytes
// fields live in the payload at Offset (a multiple of 64 from the payload's
// start, so a reader can view them in place) for NBytes bytes; tensors
// are little-endian, row-major. Other values are in the header as JSON.
// The client opens with the four bytes of ClientHello; the server then
// sends hello first and end of stream last. A stream that stops without
// end of stream is a run that failed or was interrupted.
//
// After each frame it has read whole (not the hello), the client sends its
// count of frames read on the connection, 8 bytes little-endian. A frame
// counts as delivered only then: those a trainer that left did not
// acknowledge (its socket's buffers held them) go again, first, to the next
// trainer, and the run ends only when every frame before the end of the
// stream is acknowledged. Protocol 2; protocol 1 had no acknowledgements.
package serve

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
)

// Protocol is the version in the hello frame.
const Protocol = 2

// AckSize is the length of a client's acknowledgement.
const AckSize = 8

// Magic opens every frame.
const Magic = "PRN1"

// ClientHello is what a client sends first, before the server sends it
// anything: a connection that does not (a TCP port probe) is closed
// without a frame.
const ClientHello = "PRN1"

// Frame kinds.
const (
	KindHello       = 1
	KindSample      = 2
	KindEndOfEpoch  = 3
	KindEndOfStream = 4
)

// headSize is the fixed part of a frame.
const headSize = 20

// Align is the alignment of each field's bytes within a payload.
const Align = 64

// MaxHeader and MaxPayload bound what a reader accepts, so a corrupt or
// hostile length cannot make it allocate without limit.
const (
	MaxHeader  = 64 << 20
	MaxPayload = 16 << 30
)

// trustPayload is the payload size a reader allocates up front.
const trustPayload = 64 << 20

// Hello is the first frame's header.
type Hello struct {
	Protocol int    `json:"protocol"`
	Pipeline string `json:"pipeline"`
	Stage    string `json:"stage"`
	Seed     uint64 `json:"seed"`
	// Epochs is the spec's epoch count; 0 means until stopped.
	Epochs int `json:"epochs"`
	// Resume is where a trainer that takes over from one that left
	// starts: absent for the run's first trainer.
	Resume *Resume `json:"resume,omitempty"`
}

// Resume is where in the stream a trainer that takes over starts: the
// epoch of its first frame, and how many of that epoch's frames earlier
// trainers read (0 at an epoch's start). Its first epoch is the rest of
// that one, so that a trainer counting its epochs or stepping a schedule
// can tell.
type Resume struct {
	Epoch  int   `json:"epoch"`
	Frames int64 `json:"frames"`
}

// Field is one field of a sample's header.
type Field struct {
	Name string `json:"name"`
	// DType is a tensor's dtype, "bytes" for a bytes value, or empty for
	// a value carried in Value.
	DType  string          `json:"dtype,omitempty"`
	Shape  []int           `json:"shape,omitempty"`
	Offset int64           `json:"offset,omitempty"`
	NBytes int64           `json:"nbytes,omitempty"`
	Value  json.RawMessage `json:"value,omitempty"`
}

// SampleHeader is a sample frame's header.
type SampleHeader struct {
	ID        int64   `json:"id"`
	Epoch     int     `json:"epoch"`
	BatchSize int     `json:"batch_size,omitempty"`
	Fields    []Field `json:"fields"`
}

// EpochHeader is an end-of-epoch frame's header.
type EpochHeader struct {
	Epoch int `json:"epoch"`
	// Frames is how many sample frames (samples as the sink gets them:
	// batches, after a batch stage) the sink sent in the epoch, to this
	// trainer or to one before it that left.
	Frames int64 `json:"frames"`
}

// EndHeader is the end-of-stream frame's header.
type EndHeader struct {
	// Frames is how many sample frames the sink sent in all.
	Frames int64 `json:"frames"`
}

// Frame is one decoded frame.
type Frame struct {
	Kind    uint8
	Header  []byte
	Payload []byte
}

// ErrMagic is wrapped by ReadFrame's error when a frame does not start with
// Magic: the peer is not a piperun serve sink, or the stream is out of step.
var ErrMagic = errors.New("not a piperun frame")

// AppendHead appends a frame's fixed head.
func AppendHead(b []byte, kind uint8, header, payload int) []byte {
	b = append(b, Magic...)
	b = append(b, kind, 0, 0, 0)
	b = binary.LittleEndian.AppendUint32(b, uint32(header))
	return binary.LittleEndian.AppendUint64(b, uint64(payload))
}

// ReadFrame reads one frame. It returns io.EOF only at a clean end between
// frames, and io.ErrUnexpectedEOF for a frame cut short.
func ReadFrame(r io.Reader) (Frame, error) {
	var head [headSize]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return Frame{}, err
	}
	if string(head[:4]) != Magic {
		return Frame{}, fmt.Errorf("%w: starts with %q", ErrMagic, head[:4])
	}
	f := Frame{Kind: head[4]}
	if f.Kind < KindHello || f.Kind > KindEndOfStream {
		return Frame{}, fmt.Errorf("unknown frame kind %d", f.Kind)
	}
	hn := binary.LittleEndian.Uint32(head[8:])
	pn := binary.LittleEndian.Uint64(head[12:])
	if hn > MaxHeader {
		return Frame{}, fmt.Errorf("frame header of %d bytes is over the limit of %d", hn, MaxHeader)
	}
	if pn > MaxPayload {
		return Frame{}, fmt.Errorf("frame payload of %d bytes is over the limit of %d", pn, int64(MaxPayload))
	}
	f.Header = make([]byte, hn)
	if _, err := io.ReadFull(r, f.Header); err != nil {
		return Frame{}, cut(err)
	}
	if pn > 0 {
		// Trust the length up to trustPayload; beyond it, grow as the
		// bytes arrive, so a lying head costs only what was really sent.
		buf := make([]byte, min(pn, trustPayload))
		got := 0
		for {
			n, err := io.ReadFull(r, buf[got:])
			got += n
			if err != nil {
				return Frame{}, cut(err)
			}
			if uint64(got) == pn {
				break
			}
			k := int(min(pn-uint64(got), uint64(got))) // double, up to the length
			buf = slices.Grow(buf, k)[:got+k]
		}
		f.Payload = buf
	}
	return f, nil
}

func cut(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}
