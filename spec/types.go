package spec

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/invopop/jsonschema"
	"go.yaml.in/yaml/v3"

	"github.com/piperun/piperun/internal/bytesize"
)

// Auto is a count that may be written "auto", meaning the runner chooses.
type Auto struct {
	N    int
	Auto bool
}

// UnmarshalNode reads "auto" or a positive integer.
func (a *Auto) UnmarshalNode(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode && n.Value == "auto" {
		*a = Auto{Auto: true}
		return nil
	}
	// An integer as the other integer fields take it (exactScalar): 2.0
	// and 1e3 are integers, 2.5 is not.
	var v int
	if n.Kind != yaml.ScalarNode || (n.ShortTag() != "!!int" && n.ShortTag() != "!!float") || !exactScalar(n, reflect.Int) || n.Decode(&v) != nil {
		return fmt.Errorf("expected a positive integer or \"auto\", got %s", describe(n))
	}
	if v < 1 {
		return fmt.Errorf("must be at least 1 or \"auto\", got %d", v)
	}
	*a = Auto{N: v}
	return nil
}

// Resolve returns N, or def when the value is auto or unset.
func (a Auto) Resolve(def int) int {
	if a.Auto || a.N == 0 {
		return def
	}
	return a.N
}

// String writes the value as a spec would.
func (a Auto) String() string {
	if a.Auto || a.N == 0 {
		return "auto"
	}
	return strconv.Itoa(a.N)
}

// JSONSchema describes "auto" or a positive integer.
func (Auto) JSONSchema() *jsonschema.Schema {
	// One schema of two types rather than a oneOf, so that a validator's
	// message names the rule broken ("0 is less than 1").
	return &jsonschema.Schema{Minimum: "1", Pattern: "^auto$", Extras: map[string]any{"type": []string{"integer", "string"}}}
}

// ByteSize is a number of bytes written as an integer or with a unit
// ("512MiB", "2GiB", "1.5GB"). In a spec it is at least one byte: a memory
// budget of 0 is a mistake, not a request for the default.
type ByteSize int64

var byteUnits = []struct {
	suffix string
	mult   float64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
	{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"T", 1 << 40},
	{"k", 1 << 10}, {"m", 1 << 20}, {"g", 1 << 30}, {"t", 1 << 40}, // as docker's --memory
	{"B", 1}, {"b", 1},
}

// byteSizeRe is what ParseByteSize reads, and the schema's pattern: a
// decimal number, then a unit.
var byteSizeRe = regexp.MustCompile(`^(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?\s*(?:KiB|MiB|GiB|TiB|KB|MB|GB|TB|[KMGTBkmgtb])?$`)

// ParseByteSize parses a byte size such as "2GiB".
func ParseByteSize(s string) (ByteSize, error) {
	t := strings.TrimSpace(s)
	if !byteSizeRe.MatchString(t) {
		// strconv would take 0x10, Inf and 1_000 too, which the schema
		// refuses.
		return 0, fmt.Errorf("invalid byte size %q (want e.g. 512MiB, 2GiB, 1000000)", s)
	}
	mult := 1.0
	for _, u := range byteUnits {
		if strings.HasSuffix(t, u.suffix) {
			mult = u.mult
			t = strings.TrimSpace(strings.TrimSuffix(t, u.suffix))
			break
		}
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || f < 0 || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, fmt.Errorf("invalid byte size %q (want e.g. 512MiB, 2GiB, 1000000)", s)
	}
	v := f * mult
	// A fraction of a unit rounds down (String writes 1.4GiB), but a count
	// of bytes is whole: 2.5 is a mistake, not 2.
	if mult == 1 && v != math.Trunc(v) {
		return 0, fmt.Errorf("byte size %q is not a whole number of bytes", s)
	}
	if v > math.MaxInt64/2 {
		return 0, fmt.Errorf("byte size %q is too large", s)
	}
	return ByteSize(v), nil
}

// UnmarshalNode reads a byte size.
func (b *ByteSize) UnmarshalNode(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("expected a byte size such as 2GiB, got %s", describe(n))
	}
	v, err := ParseByteSize(n.Value)
	if err != nil {
		return err
	}
	if v < 1 {
		return fmt.Errorf("must be at least 1 byte, got %q (leave it out for the default)", n.Value)
	}
	*b = v
	return nil
}

// String formats the size with the largest binary unit that keeps it short.
func (b ByteSize) String() string { return bytesize.Format(int64(b)) }

// JSONSchema describes a byte size.
func (ByteSize) JSONSchema() *jsonschema.Schema {
	return &jsonschema.Schema{Minimum: "1", Pattern: byteSizeRe.String(),
		Extras: map[string]any{"type": []string{"integer", "string"}}}
}

// Duration is a length of time written as Go writes one ("90s", "10m",
// "1h30m"). In a spec it is more than zero: 0 would mean at once, never
// what a timeout is set for.
type Duration time.Duration

// durationRe is what ParseDuration reads, and the schema's pattern: Go's
// time.ParseDuration without a sign, one or more numbers each with a unit.
var durationRe = regexp.MustCompile(`^(?:(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:ns|us|µs|μs|ms|s|m|h))+$`)

// ParseDuration parses a duration such as "10m" that is more than zero.
func ParseDuration(s string) (Duration, error) {
	t := strings.TrimSpace(s)
	d, err := time.ParseDuration(t)
	if err != nil || !durationRe.MatchString(t) {
		return 0, fmt.Errorf("invalid duration %q (want e.g. 90s, 10m, 1h30m)", s)
	}
	if d <= 0 {
		return 0, fmt.Errorf("duration %q must be more than 0", s)
	}
	return Duration(d), nil
}

// UnmarshalNode reads a duration.
func (d *Duration) UnmarshalNode(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("expected a duration such as 10m, got %s", describe(n))
	}
	v, err := ParseDuration(n.Value)
	if err != nil {
		return err
	}
	*d = v
	return nil
}

// String writes the duration as time.Duration does ("10m0s").
func (d Duration) String() string { return time.Duration(d).String() }

// JSONSchema describes a duration.
func (Duration) JSONSchema() *jsonschema.Schema {
	return &jsonschema.Schema{Type: "string", Pattern: durationRe.String()}
}

// Map is a YAML mapping that keeps its key order and each key's position,
// for fields such as map's `set:` that are evaluated in order.
type Map[T any] struct {
	Entries []Entry[T]
}

// Entry is one key of a Map.
type Entry[T any] struct {
	Key   string
	Value T
	Pos   Pos
}

func (m *Map[T]) valueType() reflect.Type { return reflect.TypeOf((*T)(nil)).Elem() }

func (m *Map[T]) appendEntry(key string, pos Pos, v reflect.Value) {
	m.Entries = append(m.Entries, Entry[T]{Key: key, Value: v.Interface().(T), Pos: pos})
}

// Len returns the number of entries.
func (m Map[T]) Len() int { return len(m.Entries) }

// Get returns the value for key.
func (m Map[T]) Get(key string) (T, bool) {
	for _, e := range m.Entries {
		if e.Key == key {
			return e.Value, true
		}
	}
	var zero T
	return zero, false
}

// MarshalJSON writes the entries as [[key, value], ...] in order, leaving
// out positions: a cache fingerprint must not change when a comment moves
// a line.
func (m Map[T]) MarshalJSON() ([]byte, error) {
	out := make([][2]any, len(m.Entries))
	for i, e := range m.Entries {
		out[i] = [2]any{e.Key, e.Value}
	}
	return json.Marshal(out)
}

// JSONSchema describes an object whose values all have T's schema.
func (Map[T]) JSONSchema() *jsonschema.Schema {
	r := &jsonschema.Reflector{FieldNameTag: "yaml", DoNotReference: true, RequiredFromJSONSchemaTags: true, Mapper: schemaMapper}
	var zero T
	inner := r.Reflect(zero)
	inner.Version = ""
	inner.ID = ""
	return &jsonschema.Schema{Type: "object", AdditionalProperties: inner}
}

// StringList is one string or a list of strings.
type StringList []string

// UnmarshalNode reads a string or a list of strings.
func (s *StringList) UnmarshalNode(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		if n.ShortTag() == "!!null" {
			return errors.New("expected a string or a list of strings, got null")
		}
		*s = StringList{n.Value}
		return nil
	case yaml.SequenceNode:
		out := make(StringList, 0, len(n.Content))
		for _, c := range n.Content {
			if c.Kind != yaml.ScalarNode {
				return fmt.Errorf("expected a list of strings, found %s at line %d", describe(c), c.Line)
			}
			out = append(out, c.Value)
		}
		*s = out
		return nil
	}
	return fmt.Errorf("expected a string or a list of strings, got %s", describe(n))
}

// JSONSchema describes a string or a list of strings.
func (StringList) JSONSchema() *jsonschema.Schema {
	return &jsonschema.Schema{OneOf: []*jsonschema.Schema{
		{Type: "string"},
		{Type: "array", Items: &jsonschema.Schema{Type: "string"}},
	}}
}

// schemaMapper is a hook for types whose schema cannot be reflected.
func schemaMapper(t reflect.Type) *jsonschema.Schema { return nil }
