package serve_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"net"
	"reflect"
	"strconv"
	"testing"

	"github.com/piperun/piperun/sample"
	"github.com/piperun/piperun/serve"
	"github.com/piperun/piperun/tensor"
)

func frameOf(t testing.TB, s *sample.Sample) []byte {
	t.Helper()
	bufs, err := serve.EncodeSample(s)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if _, err := bufs.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// roundTrip sends s through a frame and decodes it as a client does.
func roundTrip(t *testing.T, s *sample.Sample) *sample.Sample {
	t.Helper()
	f, err := serve.ReadFrame(bytes.NewReader(frameOf(t, s)))
	if err != nil {
		t.Fatal(err)
	}
	got, err := serve.DecodeSample(f)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// TestRoundTrip: every kind of field value a sample can hold comes back
// from a frame as it went in, tensors aligned in the payload.
func TestRoundTrip(t *testing.T) {
	img := tensor.New(tensor.Float32, 2, 3)
	for i := range img.Float32() {
		img.Float32()[i] = float32(i) / 4
	}
	for _, tc := range []struct {
		name string
		v    any
	}{
		{"float32 tensor", img},
		{"uint8 tensor", &tensor.Tensor{DType: tensor.Uint8, Shape: []int{3}, Data: []byte{1, 2, 3}}},
		{"scalar tensor", tensor.FromInt64s([]int64{-7}).Cast(tensor.Int64)},
		{"empty tensor", tensor.New(tensor.Int32, 0, 4)},
		{"bytes", []byte("\x00\xffjpeg")},
		{"empty bytes", []byte{}},
		{"int64 beyond 2^53", int64(1<<60 + 1)},
		{"float64", 0.1},
		{"NaN", math.NaN()},
		{"-Inf", math.Inf(-1)},
		{"bool", true},
		{"string", "a caption ☃"},
		{"strings", []string{"n0", ""}},
		{"bytes list", [][]byte{{0, 1}, {}}},
		{"list", []any{"a", 1.5, true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := sample.New(41, 2, "")
			s.BatchSize = 3
			s.Fields["x"] = tc.v
			s.Fields["pad"] = []byte{9} // puts x at offset 64
			got := roundTrip(t, s)
			if got.ID != 41 || got.Epoch != 2 || got.BatchSize != 3 {
				t.Errorf("id %d, epoch %d, batch size %d", got.ID, got.Epoch, got.BatchSize)
			}
			g := got.Fields["x"]
			switch want := tc.v.(type) {
			case *tensor.Tensor:
				gt, ok := g.(*tensor.Tensor)
				if !ok || gt.DType != want.DType || fmt.Sprint(gt.Shape) != fmt.Sprint(want.Shape) || !bytes.Equal(gt.Data, want.Data) {
					t.Errorf("got %v, want %v", g, want)
				}
			case float64:
				if gf, ok := g.(float64); !ok || !(gf == want || math.IsNaN(want) && math.IsNaN(gf)) {
					t.Errorf("got %v (%T), want %v", g, g, want)
				}
			case []any:
				if fmt.Sprint(g) != fmt.Sprint(want) {
					t.Errorf("got %v, want %v", g, want)
				}
			default:
				if !reflect.DeepEqual(g, tc.v) {
					t.Errorf("got %#v, want %#v", g, tc.v)
				}
			}
		})
	}
}

// TestListRoundTrip: lists an expression makes keep what JSON cannot hold:
// bytes, NaN and infinities, int64 beyond 2^53, a whole float apart from
// an int; a tensor inside a list is refused by name.
func TestListRoundTrip(t *testing.T) {
	in := []any{int64(1<<62 + 1), 2.0, math.NaN(), math.Inf(-1), []byte{0, 0xff}, "s", nil, true, []any{[]string{"a"}, [][]byte{{7}}}}
	s := sample.New(0, 0, "")
	s.Fields["l"] = in
	got := roundTrip(t, s)
	l := got.Fields["l"].([]any)
	if fmt.Sprintf("%#v", l[0]) != "4611686018427387905" || fmt.Sprintf("%#v", l[1]) != "2" || !math.IsNaN(l[2].(float64)) || !math.IsInf(l[3].(float64), -1) {
		t.Errorf("numbers: %#v", l[:4])
	}
	if _, ok := l[1].(float64); !ok {
		t.Errorf("2.0 came back as %T", l[1])
	}
	want := `[]byte{0x0, 0xff} "s" <nil> true []interface {}{[]interface {}{"a"}, []interface {}{[]uint8{0x7}}}`
	if g := fmt.Sprintf("%#v %#v %#v %#v %#v", l[4], l[5], l[6], l[7], l[8]); g != want {
		t.Errorf("got  %s\nwant %s", g, want)
	}
	s.Fields["l"] = []any{tensor.New(tensor.Uint8, 1)}
	if _, err := serve.EncodeSample(s); err == nil || err.Error() != `field "l": cannot serve a *tensor.Tensor inside a list` {
		t.Errorf("err = %v", err)
	}
}

// TestTensorsAreAligned: each tensor's bytes start at a multiple of Align
// in the payload, so a reader can view them in place.
func TestTensorsAreAligned(t *testing.T) {
	s := sample.New(0, 0, "")
	s.Fields["a"] = []byte{1, 2, 3}
	s.Fields["b"] = tensor.New(tensor.Float64, 5)
	s.Fields["c"] = tensor.New(tensor.Uint8, 70)
	f, err := serve.ReadFrame(bytes.NewReader(frameOf(t, s)))
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Payload) != 128+70 {
		t.Errorf("payload %d bytes, want 198 (a at 0, b at 64, c at 128)", len(f.Payload))
	}
	if want := `"offset":64`; !bytes.Contains(f.Header, []byte(want)) {
		t.Errorf("header %s lacks %s", f.Header, want)
	}
}

// TestReadFrameErrors: what a reader says of streams that are not whole
// frames.
func TestReadFrameErrors(t *testing.T) {
	s := sample.New(0, 0, "")
	s.Fields["b"] = tensor.New(tensor.Float64, 5)
	whole := frameOf(t, s)
	bad := append([]byte("PRN2"), whole[4:]...)
	kind := append([]byte(nil), whole...)
	kind[4] = 9
	huge := serve.AppendHead(nil, serve.KindSample, serve.MaxHeader+1, 0)
	for _, tc := range []struct {
		name string
		in   []byte
		want string
		is   error
	}{
		{"empty", nil, "EOF", io.EOF},
		{"cut in the head", whole[:10], "unexpected EOF", io.ErrUnexpectedEOF},
		{"cut in the header", whole[:25], "unexpected EOF", io.ErrUnexpectedEOF},
		{"cut in the payload", whole[:len(whole)-1], "unexpected EOF", io.ErrUnexpectedEOF},
		{"magic", bad, `not a piperun frame: starts with "PRN2"`, serve.ErrMagic},
		{"kind", kind, "unknown frame kind 9", nil},
		{"header too big", huge, "frame header of 67108865 bytes is over the limit of 67108864", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := serve.ReadFrame(bytes.NewReader(tc.in))
			if err == nil || err.Error() != tc.want || (tc.is != nil && !errors.Is(err, tc.is)) {
				t.Errorf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

// TestParseAddress: the listen addresses the sink takes, and why others
// are refused.
func TestParseAddress(t *testing.T) {
	for _, tc := range []struct{ in, network, addr, err string }{
		{"unix:///run/p.sock", "unix", "/run/p.sock", ""},
		{"unix://rel/p.sock", "unix", "rel/p.sock", ""},
		{"tcp://127.0.0.1:5555", "tcp", "127.0.0.1:5555", ""},
		{"tcp://[::1]:0", "tcp", "[::1]:0", ""},
		{"tcp://localhost:80", "tcp", "localhost:80", ""},
		{"/run/p.sock", "", "", `"/run/p.sock": want unix:///path/to.sock or tcp://host:port`},
		{"udp://127.0.0.1:1", "", "", `"udp://127.0.0.1:1": scheme "udp" is not unix or tcp`},
		{"unix://", "", "", `"unix://": the socket path is empty`},
		{"tcp://127.0.0.1", "", "", `"tcp://127.0.0.1": address 127.0.0.1: missing port in address`},
		{"tcp://:1", "", "", `"tcp://:1": name the host to listen on, e.g. tcp://127.0.0.1:1 (an empty host listens on every interface)`},
		{"tcp://h:65536", "", "", `"tcp://h:65536": port "65536" is not a number from 0 to 65535`},
		{"tcp://h:+1", "", "", `"tcp://h:+1": port "+1" is not a number from 0 to 65535`},
		{"tcp://h:http", "", "", `"tcp://h:http": port "http" is not a number from 0 to 65535`},
	} {
		n, a, err := serve.ParseAddress(tc.in)
		es := ""
		if err != nil {
			es = err.Error()
		}
		if n != tc.network || a != tc.addr || es != tc.err {
			t.Errorf("ParseAddress(%q) = %q, %q, %q; want %q, %q, %q", tc.in, n, a, es, tc.network, tc.addr, tc.err)
		}
	}
}

// FuzzReadFrame: no byte stream makes the reader or the sample decoder
// panic or allocate past what was sent, and every tensor it decodes holds
// exactly the bytes its shape needs.
func FuzzReadFrame(f *testing.F) {
	s := sample.New(3, 1, "")
	s.Fields["image"] = tensor.New(tensor.Uint8, 2, 2, 3)
	s.Fields["label"] = int64(7)
	s.Fields["raw"] = []byte("jpeg")
	f.Add(frameOf(f, s))
	hello, _ := serve.EncodeJSON(serve.KindHello, serve.Hello{Protocol: 1, Pipeline: "p"})
	f.Add(hello)
	f.Add([]byte("PRN1\x02\x00\x00\x00\x0b\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00{\"fields\":[{\"name\":\"x\",\"dtype\":\"float32\",\"shape\":[-1],\"offset\":0,\"nbytes\":0}]}"))
	f.Add([]byte("PRN1\x02\x00\x00\x00\x00\x00\x00\x00\xff\xff\xff\xff\x00\x00\x00\x00"))
	overflow := `{"id":0,"epoch":0,"fields":[{"name":"x","dtype":"float32","shape":[4611686018427387904]}]}`
	f.Add(append(serve.AppendHead(nil, serve.KindSample, len(overflow), 0), overflow...))
	f.Fuzz(func(t *testing.T, b []byte) {
		r := bytes.NewReader(b)
		for {
			fr, err := serve.ReadFrame(r)
			if err != nil {
				return
			}
			if len(fr.Payload) > len(b) || len(fr.Header) > len(b) {
				t.Fatalf("frame of %d+%d bytes from %d bytes of input", len(fr.Header), len(fr.Payload), len(b))
			}
			if fr.Kind != serve.KindSample {
				continue
			}
			smp, err := serve.DecodeSample(fr)
			if err != nil {
				continue
			}
			for k, v := range smp.Fields {
				if x, ok := v.(*tensor.Tensor); ok {
					if n, ok := exactBytes(x.Shape, x.DType.Size()); !ok || n != uint64(len(x.Data)) {
						t.Fatalf("field %s: %v %s with %d bytes", k, x.Shape, x.DType, len(x.Data))
					}
				}
			}
		}
	})
}

// exactBytes is the bytes a shape of elements of size needs, without
// wrapping around; ok is false past 2^64.
func exactBytes(shape []int, size int) (uint64, bool) {
	n := uint64(size)
	for _, d := range shape {
		hi, lo := bits.Mul64(n, uint64(d))
		if hi != 0 {
			return 0, false
		}
		n = lo
	}
	return n, true
}

// Example encodes a batch as the serve sink sends it and reads it back as
// a trainer's client does.
func Example() {
	batch := sample.New(0, 0, "")
	batch.BatchSize = 2
	batch.Fields["label"] = tensor.FromInt64s([]int64{3, 1})
	batch.Fields["image"] = tensor.New(tensor.Float32, 2, 4, 4, 3)
	bufs, _ := serve.EncodeSample(batch)
	var wire bytes.Buffer
	bufs.WriteTo(&wire)

	f, _ := serve.ReadFrame(&wire)
	got, _ := serve.DecodeSample(f)
	fmt.Println(got.BatchSize, got.Fields["label"].(*tensor.Tensor).Int64(), got.Fields["image"].(*tensor.Tensor).Shape)
	// Output: 2 [3 1] [2 4 4 3]
}

// FuzzParseAddress: no listen string panics, and an accepted one is a
// unix path or a TCP host:port with a port in range, which the address
// round-trips to.
func FuzzParseAddress(f *testing.F) {
	for _, s := range []string{"unix:///run/p.sock", "unix://rel/p.sock", "tcp://127.0.0.1:5555", "tcp://[::1]:0", "tcp://h:65536",
		"tcp://:1", "udp://x:1", "unix://", "tcp://h:+1", "tcp://[::1", "tcp://a:b:c", "", "://"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		network, addr, err := serve.ParseAddress(s)
		if err != nil {
			if network != "" || addr != "" || err.Error() == "" {
				t.Fatalf("ParseAddress(%q) = %q, %q, %v", s, network, addr, err)
			}
			return
		}
		switch network {
		case "unix":
			if addr == "" || "unix://"+addr != s {
				t.Fatalf("ParseAddress(%q) = unix %q", s, addr)
			}
		case "tcp":
			host, port, err := net.SplitHostPort(addr)
			if err != nil || host == "" || "tcp://"+addr != s {
				t.Fatalf("ParseAddress(%q) = tcp %q (%v)", s, addr, err)
			}
			if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
				t.Fatalf("ParseAddress(%q): port %q", s, port)
			}
		default:
			t.Fatalf("ParseAddress(%q): network %q", s, network)
		}
	})
}

// TestHeaderOverTheLimitIsRefused: a sample whose JSON header no client
// would read (a batch of 64 one-MiB encoded images, base64 in the header)
// is an error naming the field, not a frame every trainer rejects while
// the sink waits for the next one for ever.
func TestHeaderOverTheLimitIsRefused(t *testing.T) {
	s := sample.New(7, 0, "")
	img := make([][]byte, 49)
	for i := range img {
		img[i] = make([]byte, 1<<20)
	}
	s.Fields["jpeg"] = img
	s.Fields["label"] = int64(1)
	_, err := serve.EncodeSample(s)
	want := `sample 7: its header is 68507362 bytes, over the 67108864 a client reads; field "jpeg" takes 68507244 of them as JSON (a list of bytes or strings travels in the header: batch fewer samples)`
	if err == nil || err.Error() != want {
		t.Errorf("got %v\nwant %s", err, want)
	}
	s.Fields["jpeg"] = img[:40]
	if _, err := serve.EncodeSample(s); err != nil {
		t.Errorf("40 MiB of bytes: %v", err)
	}
}
