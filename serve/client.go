package serve

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/piperun/piperun/sample"
	"github.com/piperun/piperun/tensor"
)

// ErrEndOfEpoch is what Client.Next returns at the end of each epoch; the
// next call reads the next epoch.
var ErrEndOfEpoch = errors.New("end of epoch")

// ErrCut is wrapped by Client.Next's error when the stream stops without
// its end-of-stream frame: the run failed or was interrupted.
var ErrCut = errors.New("the stream ended before its end-of-stream frame: the run failed or was interrupted")

// Client reads one serve sink's stream.
type Client struct {
	conn  net.Conn
	r     *bufio.Reader
	hello Hello
	read  uint64 // frames read after the hello, acknowledged
	// Epoch is the last end-of-epoch frame read.
	Epoch EpochHeader
	// End is the end-of-stream frame, once read.
	End *EndHeader
}

// Dial connects to a serve sink's listen address (unix:///path or
// tcp://host:port) and reads its hello, waiting for it as long as the sink
// serves another trainer (DialContext bounds the wait).
func Dial(address string) (*Client, error) {
	return DialContext(context.Background(), address)
}

// DialContext is Dial bounded by ctx: the connect and the wait for the
// hello end when ctx does, and the error then wraps ctx's. Past the hello,
// ctx has no effect.
func DialContext(ctx context.Context, address string) (*Client, error) {
	network, addr, err := ParseAddress(address)
	if err != nil {
		return nil, err
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	// A deadline in the past wakes the reads and writes below.
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	c := &Client{conn: conn, r: bufio.NewReaderSize(conn, 1<<20)}
	failed := func(what string, err error) (*Client, error) {
		stop()
		conn.Close()
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return nil, fmt.Errorf("%s %s: %w", what, address, err)
	}
	if _, err := io.WriteString(conn, ClientHello); err != nil {
		return failed("greet", err)
	}
	f, err := ReadFrame(c.r)
	if err != nil {
		return failed("read hello from", cut(err))
	}
	if !stop() {
		// ctx ended as the hello came: its deadline is set, or about to be.
		return failed("read hello from", ctx.Err())
	}
	if f.Kind != KindHello {
		conn.Close()
		return nil, fmt.Errorf("%s: first frame is of kind %d, not hello", address, f.Kind)
	}
	if err := json.Unmarshal(f.Header, &c.hello); err != nil {
		conn.Close()
		return nil, fmt.Errorf("%s: hello: %w", address, err)
	}
	if c.hello.Protocol != Protocol {
		conn.Close()
		return nil, fmt.Errorf("%s: serves protocol %d; this client speaks %d (use the client of the same piperun version)", address, c.hello.Protocol, Protocol)
	}
	return c, nil
}

// Hello returns what the server said when the client connected.
func (c *Client) Hello() Hello { return c.hello }

// Next returns the next sample. It returns ErrEndOfEpoch at the end of an
// epoch, io.EOF after the end-of-stream frame, and an error wrapping ErrCut
// if the stream stops short.
func (c *Client) Next() (*sample.Sample, error) {
	if c.End != nil {
		return nil, io.EOF
	}
	f, err := ReadFrame(c.r)
	// A reset is a cut too: a server that closes while acknowledgements
	// it has not read wait in its socket resets the connection.
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) {
		return nil, ErrCut
	}
	if err != nil {
		return nil, err
	}
	c.ack()
	switch f.Kind {
	case KindSample:
		return DecodeSample(f)
	case KindEndOfEpoch:
		if err := json.Unmarshal(f.Header, &c.Epoch); err != nil {
			return nil, fmt.Errorf("end of epoch: %w", err)
		}
		return nil, ErrEndOfEpoch
	case KindEndOfStream:
		c.End = new(EndHeader)
		if err := json.Unmarshal(f.Header, c.End); err != nil {
			return nil, fmt.Errorf("end of stream: %w", err)
		}
		return nil, io.EOF
	}
	return nil, fmt.Errorf("unexpected frame of kind %d", f.Kind)
}

// closeWait bounds how long Close reads on for the server to close first.
const closeWait = 2 * time.Second

// Close leaves the stream: the frames read so far stay delivered, the rest
// go to the next trainer. Closing a socket that holds unread frames resets
// it, and the reset drops what the kernel has not sent yet, the last
// acknowledgements among them (dozens on a busy machine, as TCP's small
// queues hold them): so Close shuts the write side, which sends them and
// then the end, and reads on, dropping frames, until the server has read
// that end and closed its side, for at most closeWait. It reads the
// connection itself, so it must not run while Next does.
func (c *Client) Close() error {
	if cw, ok := c.conn.(interface{ CloseWrite() error }); ok && cw.CloseWrite() == nil {
		c.conn.SetReadDeadline(time.Now().Add(closeWait))
		io.Copy(io.Discard, c.conn) // until EOF, or the deadline's error
	}
	return c.conn.Close()
}

// ack tells the server one more frame was read. Its error is left to the
// next read, which sees a connection that failed.
func (c *Client) ack() {
	c.read++
	var b [AckSize]byte
	binary.LittleEndian.PutUint64(b[:], c.read)
	c.conn.Write(b[:])
}

// DecodeSample decodes a sample frame; tensors and bytes alias f.Payload.
func DecodeSample(f Frame) (*sample.Sample, error) {
	var h SampleHeader
	if err := json.Unmarshal(f.Header, &h); err != nil {
		return nil, fmt.Errorf("sample header: %w", err)
	}
	s := sample.New(h.ID, h.Epoch, "")
	s.BatchSize = h.BatchSize
	for _, fd := range h.Fields {
		v, err := decodeField(fd, f.Payload)
		if err != nil {
			return nil, fmt.Errorf("sample %d field %q: %w", h.ID, fd.Name, err)
		}
		s.Fields[fd.Name] = v
	}
	return s, nil
}

func decodeField(fd Field, payload []byte) (any, error) {
	if fd.Value == nil {
		if fd.Offset < 0 || fd.NBytes < 0 || fd.Offset > int64(len(payload)) || fd.NBytes > int64(len(payload))-fd.Offset {
			return nil, fmt.Errorf("bytes %d..%d outside the payload of %d", fd.Offset, fd.Offset+fd.NBytes, len(payload))
		}
		data := payload[fd.Offset : fd.Offset+fd.NBytes : fd.Offset+fd.NBytes]
		if fd.DType == "bytes" {
			return data, nil
		}
		dt, err := tensor.ParseDType(fd.DType)
		if err != nil {
			return nil, err
		}
		return tensor.FromBytes(dt, fd.Shape, data)
	}
	switch fd.DType {
	case "int64":
		var x int64
		return x, json.Unmarshal(fd.Value, &x)
	case "float64":
		var x any
		if err := json.Unmarshal(fd.Value, &x); err != nil {
			return nil, err
		}
		switch t := x.(type) {
		case float64:
			return t, nil
		case string:
			return parseSpecial(t)
		}
		return nil, fmt.Errorf("float64 value %s", fd.Value)
	case "bool":
		var x bool
		return x, json.Unmarshal(fd.Value, &x)
	case "string":
		var x string
		return x, json.Unmarshal(fd.Value, &x)
	case "strings":
		var x []string
		return x, json.Unmarshal(fd.Value, &x)
	case "bytes_list":
		var l []string
		if err := json.Unmarshal(fd.Value, &l); err != nil {
			return nil, err
		}
		out := make([][]byte, len(l))
		for i, e := range l {
			b, err := base64.StdEncoding.DecodeString(e)
			if err != nil {
				return nil, err
			}
			out[i] = b
		}
		return out, nil
	case "list":
		d := json.NewDecoder(bytes.NewReader(fd.Value))
		d.UseNumber()
		var x []any
		if err := d.Decode(&x); err != nil {
			return nil, err
		}
		return untag(x)
	case "null":
		return nil, nil
	}
	return nil, fmt.Errorf("unknown type %q", fd.DType)
}

// untag turns a list's JSON back into values: numbers with a point or an
// exponent into float64, others into int64, tagged objects into bytes and
// non-finite floats (see appendList).
func untag(v any) (any, error) {
	switch x := v.(type) {
	case json.Number:
		if strings.ContainsAny(string(x), ".eE") {
			return x.Float64()
		}
		return x.Int64()
	case []any:
		for i, e := range x {
			u, err := untag(e)
			if err != nil {
				return nil, err
			}
			x[i] = u
		}
		return x, nil
	case map[string]any:
		if s, ok := x["b64"].(string); ok && len(x) == 1 {
			return base64.StdEncoding.DecodeString(s)
		}
		if s, ok := x["f"].(string); ok && len(x) == 1 {
			return parseSpecial(s)
		}
		return nil, fmt.Errorf("unknown tagged value %v", x)
	}
	return v, nil
}

func parseSpecial(s string) (float64, error) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || !(math.IsNaN(f) || math.IsInf(f, 0)) {
		return 0, fmt.Errorf("float64 value %q", s)
	}
	return f, nil
}

// ParseAddress splits a listen address into a network and an address for
// net.Listen and net.Dial: unix:///run/p.sock → ("unix", "/run/p.sock"),
// tcp://127.0.0.1:5555 → ("tcp", "127.0.0.1:5555").
func ParseAddress(address string) (network, addr string, err error) {
	scheme, rest, ok := strings.Cut(address, "://")
	if !ok {
		return "", "", fmt.Errorf("%q: want unix:///path/to.sock or tcp://host:port", address)
	}
	switch scheme {
	case "unix":
		if rest == "" {
			return "", "", fmt.Errorf("%q: the socket path is empty", address)
		}
		return "unix", rest, nil
	case "tcp":
		host, port, err := net.SplitHostPort(rest)
		if err != nil {
			return "", "", fmt.Errorf("%q: %w", address, err)
		}
		if host == "" {
			return "", "", fmt.Errorf("%q: name the host to listen on, e.g. tcp://127.0.0.1:%s (an empty host listens on every interface)", address, port)
		}
		var n int
		if _, err := fmt.Sscanf(port, "%d", &n); err != nil || n < 0 || n > 65535 || fmt.Sprint(n) != port {
			return "", "", fmt.Errorf("%q: port %q is not a number from 0 to 65535", address, port)
		}
		return "tcp", rest, nil
	}
	return "", "", fmt.Errorf("%q: scheme %q is not unix or tcp", address, scheme)
}
