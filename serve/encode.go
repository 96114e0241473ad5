package serve

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"strconv"

	"github.com/piperun/piperun/sample"
	"github.com/piperun/piperun/tensor"
)

var zeros [Align]byte

// EncodeSample returns the frame of s as buffers to write in order (with
// net.Buffers, so tensor bytes are written from where they lie, not
// copied). The buffers alias s's tensors: write them before s is recycled.
func EncodeSample(s *sample.Sample) (net.Buffers, error) {
	h := SampleHeader{ID: s.ID, Epoch: s.Epoch, BatchSize: s.BatchSize}
	var data [][]byte
	var off int64
	for _, name := range sample.SortedKeys(s.Fields) {
		f := Field{Name: name}
		switch v := s.Fields[name].(type) {
		case *tensor.Tensor:
			f.DType, f.Shape, f.NBytes = v.DType.String(), v.Shape, int64(len(v.Data))
			if f.Shape == nil {
				f.Shape = []int{}
			}
			data = append(data, v.Data)
		case []byte:
			f.DType, f.NBytes = "bytes", int64(len(v))
			data = append(data, v)
		default:
			dt, val, err := encodeValue(v)
			if err != nil {
				return nil, fmt.Errorf("field %q: %w", name, err)
			}
			f.DType, f.Value = dt, val
			h.Fields = append(h.Fields, f)
			continue
		}
		off = (off + Align - 1) / Align * Align
		f.Offset = off
		off += f.NBytes
		h.Fields = append(h.Fields, f)
	}
	hdr, err := json.Marshal(h)
	if err != nil {
		return nil, err
	}
	if len(hdr) > MaxHeader {
		// No client would read it: the sink would hand it to one trainer
		// after another for ever.
		big, size := "", 0
		for _, f := range h.Fields {
			if len(f.Value) > size {
				big, size = f.Name, len(f.Value)
			}
		}
		return nil, fmt.Errorf("sample %d: its header is %d bytes, over the %d a client reads; field %q takes %d of them as JSON (a list of bytes or strings travels in the header: batch fewer samples)",
			s.ID, len(hdr), MaxHeader, big, size)
	}
	bufs := net.Buffers{AppendHead(make([]byte, 0, headSize), KindSample, len(hdr), int(off)), hdr}
	var at int64
	for _, d := range data {
		if pad := (at + Align - 1) / Align * Align; pad > at {
			bufs = append(bufs, zeros[:pad-at])
			at = pad
		}
		bufs = append(bufs, d)
		at += int64(len(d))
	}
	return bufs, nil
}

// encodeValue writes a non-tensor value as JSON, with the type a reader
// needs to tell int64 from float64 and text from base64 bytes.
func encodeValue(v any) (string, json.RawMessage, error) {
	var dt string
	var x any
	switch t := v.(type) {
	case int64:
		dt, x = "int64", t
	case float64:
		if math.IsNaN(t) || math.IsInf(t, 0) {
			dt, x = "float64", fmt.Sprint(t) // "NaN", "+Inf", "-Inf"
		} else {
			dt, x = "float64", t
		}
	case bool:
		dt, x = "bool", t
	case string:
		dt, x = "string", t
	case []string:
		dt, x = "strings", t
	case [][]byte:
		l := make([]string, len(t))
		for i, b := range t {
			l[i] = base64.StdEncoding.EncodeToString(b)
		}
		dt, x = "bytes_list", l
	case []any:
		b, err := appendList(nil, t)
		return "list", b, err
	case nil:
		dt, x = "null", nil
	default:
		return "", nil, fmt.Errorf("cannot serve a %T", v)
	}
	b, err := json.Marshal(x)
	if err != nil {
		return "", nil, err
	}
	return dt, b, nil
}

// appendList writes a list an expression made as JSON. What JSON cannot
// hold is tagged: bytes as {"b64": "…"}, a NaN or infinite float as
// {"f": "NaN" | "+Inf" | "-Inf"}; a float is written with a decimal point
// or an exponent, so a reader tells 2.0 from 2.
func appendList(b []byte, l []any) ([]byte, error) {
	b = append(b, '[')
	for i, v := range l {
		if i > 0 {
			b = append(b, ',')
		}
		var err error
		if b, err = appendItem(b, v); err != nil {
			return nil, err
		}
	}
	return append(b, ']'), nil
}

func appendItem(b []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case bool:
		return strconv.AppendBool(b, x), nil
	case int64:
		return strconv.AppendInt(b, x, 10), nil
	case int:
		return strconv.AppendInt(b, int64(x), 10), nil
	case int32:
		return strconv.AppendInt(b, int64(x), 10), nil
	case float32:
		return appendItem(b, float64(x))
	case float64:
		switch {
		case math.IsNaN(x):
			return append(b, `{"f":"NaN"}`...), nil
		case math.IsInf(x, 1):
			return append(b, `{"f":"+Inf"}`...), nil
		case math.IsInf(x, -1):
			return append(b, `{"f":"-Inf"}`...), nil
		}
		f := strconv.AppendFloat(nil, x, 'g', -1, 64)
		if !bytes.ContainsAny(f, ".eE") {
			f = append(f, ".0"...)
		}
		return append(b, f...), nil
	case string:
		q, err := json.Marshal(x)
		return append(b, q...), err
	case []byte:
		b = append(b, `{"b64":"`...)
		b = base64.StdEncoding.AppendEncode(b, x)
		return append(b, `"}`...), nil
	case []string:
		l := make([]any, len(x))
		for i, e := range x {
			l[i] = e
		}
		return appendList(b, l)
	case [][]byte:
		l := make([]any, len(x))
		for i, e := range x {
			l[i] = e
		}
		return appendList(b, l)
	case []any:
		return appendList(b, x)
	}
	return nil, fmt.Errorf("cannot serve a %T inside a list", v)
}

// EncodeJSON returns a frame whose header is v as JSON and whose payload is
// empty (hello, end of epoch, end of stream).
func EncodeJSON(kind uint8, v any) ([]byte, error) {
	hdr, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(AppendHead(make([]byte, 0, headSize+len(hdr)), kind, len(hdr), 0), hdr...), nil
}
