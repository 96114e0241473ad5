package cli

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/piperun/piperun/example"
	"github.com/piperun/piperun/imageops"
	"github.com/piperun/piperun/internal/fileguard"
	"github.com/piperun/piperun/tfrecord"
)

// Limits of what inspect prints for one feature.
const (
	inspectMaxValues = 8  // list values shown before "…"
	inspectMaxText   = 64 // bytes of a text value shown before it is cut
	inspectHexBytes  = 16 // bytes of a binary value shown as hex
)

func inspectCmd(g *globals) *cobra.Command {
	var records int
	var format string
	cmd := &cobra.Command{
		Use:   "inspect FILE.tfrecord",
		Short: "Count a TFRecord file's records and show the decoded features of the first ones",
		Long: "inspect reads the whole file, checking every record's framing and CRCs, and prints the\n" +
			"record count, the compression detected and the tf.train.Example features of the first\n" +
			"--records records. FILE may be a pipe, and - is standard input. Exit 0 on success, 1 on a\n" +
			"corrupt or unreadable file, 2 on usage errors.",
		Args: exactArgs(1, "one TFRecord file"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if format != "text" && format != "json" {
				return exit(ExitUsage, fmt.Errorf("--format must be text or json, got %q", format))
			}
			if records < 0 {
				return exit(ExitUsage, fmt.Errorf("--records must be at least 0, got %d", records))
			}
			rep, err := inspectFile(args[0], records)
			if rep == nil {
				return exit(ExitFailed, err)
			}
			// A damaged file still shows its readable records, and the
			// JSON carries the errors, for a script to read.
			if format == "json" {
				if err := writeJSON(g.stdout, rep); err != nil {
					return exit(ExitFailed, err)
				}
			} else {
				rep.text(g.stdout)
			}
			if err != nil {
				return exit(ExitFailed, err)
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&records, "records", 3, "number of records whose features are shown")
	cmd.Flags().StringVar(&format, "format", "text", "output format: text or json")
	return cmd
}

// inspectReport is what inspect prints; its JSON form is the --format json
// output.
type inspectReport struct {
	File        string          `json:"file"`
	Compression string          `json:"compression"`
	Records     int             `json:"records"`
	Shown       []inspectRecord `json:"shown"`
	// Damaged lists the damage that the reader got past, each as its
	// error: a record whose data fails its checksum, or a stretch from a
	// bad header to the next valid record. A tfrecord stage with
	// on_error: skip skips the same, one skip each, and reads the
	// records between them, which Records counts. Only the first
	// inspectMaxDamaged (20) are listed, and printed.
	Damaged []string `json:"damaged,omitempty"`
	// DamagedCount counts all the damage, listed in Damaged or not: with
	// the end that cut the read short, if one did, as the stage skips it.
	DamagedCount int `json:"damaged_count"`
	// Error is the first error of all: Damaged[0] when there is damage,
	// else EndError.
	Error string `json:"error,omitempty"`
	// EndError is the error that ended the read before the end of the
	// file: a cut, a compressed stream that does not decompress, a
	// resync scan that gave up; or, when no valid record follows the
	// last bad header, that damage's error (also counted in
	// DamagedCount). Empty when the file was read to its end.
	EndError string `json:"end_error,omitempty"`
	// Ended is set when the file could not be read to its end (EndError
	// says why): Records counts the records before it.
	Ended bool `json:"ended,omitempty"`
	// lastToEnd is set when the last damage runs to the end of the file,
	// so Ended adds no further error.
	lastToEnd bool
}

// inspectMaxDamaged is how many of a file's damaged records inspect lists
// and prints: a file with every checksum bad would otherwise print an
// error for each record.
const inspectMaxDamaged = 20

type inspectRecord struct {
	Index int `json:"index"`
	Bytes int `json:"bytes"`
	// NotExample says why the record is not a tf.train.Example; empty when
	// it is one.
	NotExample string           `json:"not_example,omitempty"`
	Features   []inspectFeature `json:"features,omitempty"`
	// FeatureLists are a tf.train.SequenceExample's, whose Features are
	// then its context.
	FeatureLists []inspectFeatureList `json:"feature_lists,omitempty"`
}

// inspectFeatureList is a SequenceExample's feature list: its step count
// and its first steps.
type inspectFeatureList struct {
	Key        string        `json:"key"`
	Steps      int           `json:"steps"`
	FirstSteps []inspectStep `json:"first_steps"`
}

// inspectStep is a step of a feature list: a feature without a key.
type inspectStep struct {
	Kind      string `json:"kind"`
	Length    int    `json:"length"`
	Values    []any  `json:"values"`
	Truncated bool   `json:"truncated,omitempty"`
	text      string
}

// inspectMaxSteps is how many steps of a feature list inspect shows.
const inspectMaxSteps = 3

type inspectFeature struct {
	Key    string `json:"key"`
	Kind   string `json:"kind"`
	Length int    `json:"length"`
	// Values are the first values as JSON gives them: numbers for int64
	// and float features (a float32's shortest form, with a ".0" where it
	// has no point or exponent; NaN and the
	// infinities, which JSON cannot hold, as the strings "NaN", "+Inf",
	// "-Inf"; int64 beyond 2^53 exactly, which JavaScript rounds); for
	// bytes, the text itself when it is short text, else an object
	// {"bytes": length, "about": description} ("JPEG 500×375 (110201
	// bytes)", a hex prefix), so text never reads as a description. shown
	// is how the text format prints each.
	Values []any `json:"values"`
	shown  []string
	// Truncated is set when only the first values are listed.
	Truncated bool `json:"truncated,omitempty"`
}

func compressionName(c tfrecord.Compression) string {
	switch c {
	case tfrecord.Gzip:
		return "gzip"
	case tfrecord.Zlib:
		return "zlib"
	}
	return "none"
}

// inspectFile reads every record of path, checking the framing, and
// describes the first n. A file found damaged gives the report of the
// records before the damage and the error; one that cannot be opened, no
// report.
func inspectFile(path string, n int) (*inspectReport, error) {
	f := os.Stdin // "-", as for cat
	if path != "-" {
		var err error
		if f, err = os.Open(path); err != nil {
			return nil, err
		}
		defer f.Close()
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeDevice != 0 {
			// /dev/zero never ends: it was scanned forever, silently.
			return nil, fmt.Errorf("%s is a device, not a file of records", path)
		}
	}
	in := fileguard.Reader(f) // a file rewritten while read says so
	head := make([]byte, 16)
	k, err := io.ReadFull(in, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	comp := tfrecord.Detect(path, head[:k])
	// The head is read again from memory, not by seeking back: a pipe
	// (/dev/stdin under `gsutil cat … | piperun inspect /dev/stdin`)
	// cannot seek.
	r, err := tfrecord.NewReader(io.MultiReader(bytes.NewReader(head[:k]), in), comp, path)
	if err != nil {
		return nil, err
	}
	// Read past damage as a tfrecord stage under on_error: skip does, so
	// that the count says what a run would get, not only what comes
	// before the first bad byte.
	r.SetResync(true)
	rep := &inspectReport{File: path, Compression: compressionName(comp), Shown: []inspectRecord{}}
	// shown are the errors printed: the first damage, up to
	// inspectMaxDamaged, then the one that ended the read, if not among
	// them.
	var shown []error
	var first, end error
	// done records the damage found, if any, in rep and returns it.
	done := func() (*inspectReport, error) {
		if first == nil {
			first = end
		}
		if first != nil {
			rep.Error = first.Error()
		}
		if end != nil {
			rep.EndError = end.Error()
			if len(shown) == 0 || shown[len(shown)-1] != end {
				shown = append(shown, end)
			}
		}
		return rep, errors.Join(shown...)
	}
	for {
		idx := r.Index()
		rec, err := r.Next()
		if err == io.EOF {
			return done()
		}
		if err != nil {
			var ce *tfrecord.CorruptError
			if !errors.As(err, &ce) {
				err = fmt.Errorf("%s: record %d at byte offset %d: %w", path, r.Index(), r.Offset(), err)
			}
			if ce != nil && ce.ReadsOn() {
				if first == nil {
					first = err
				}
				rep.DamagedCount++
				if len(rep.Damaged) < inspectMaxDamaged {
					rep.Damaged = append(rep.Damaged, err.Error())
					shown = append(shown, err)
				}
				// A bad header with no valid record after it runs
				// to the end: the next Next says io.EOF.
				if ce.Skipped > 0 && !ce.Resumed {
					rep.Ended, rep.lastToEnd = true, true
					end = err
				}
				continue
			}
			// A cut, or a stream that does not decompress, ends the file:
			// one damage, as a tfrecord stage under on_error: skip counts
			// it (damaged_count was 0 for a cut file).
			rep.Ended, end = true, err
			rep.DamagedCount++
			if first == nil {
				first = err
			}
			if len(rep.Damaged) < inspectMaxDamaged {
				rep.Damaged = append(rep.Damaged, err.Error())
				shown = append(shown, err)
			}
			return done()
		}
		if len(rep.Shown) < n {
			rep.Shown = append(rep.Shown, describeRecord(idx, rec))
		}
		rep.Records++
	}
}

func describeRecord(i int, rec []byte) inspectRecord {
	out := inspectRecord{Index: i, Bytes: len(rec)}
	ex, err := example.Unmarshal(rec)
	if err != nil {
		out.NotExample = err.Error()
		// Another message can parse as an Example by accident (an
		// ExampleListWithContext puts whole Examples where keys go).
		if nt := (*example.NotTextError)(nil); errors.As(err, &nt) {
			out.NotExample = fmt.Sprintf("feature key %s is not text", quotePreview(nt.Key))
		}
		return out
	}
	keys := make([]string, 0, len(ex.Features))
	for k := range ex.Features {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		out.Features = append(out.Features, describeFeature(k, ex.Features[k]))
	}
	lists, err := example.FeatureLists(rec)
	if err != nil && example.HasFeatureLists(rec) {
		out.NotExample = err.Error() // a damaged SequenceExample
		return out
	}
	// Otherwise its field 2 is no SequenceExample's feature_lists, and an
	// Example has no field 2: an unknown field, which protocol buffers
	// (TensorFlow's parse, parse_example) pass over.
	keys = keys[:0]
	for k := range lists {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fl := inspectFeatureList{Key: k, Steps: len(lists[k]), FirstSteps: []inspectStep{}}
		for _, st := range lists[k][:min(len(lists[k]), inspectMaxSteps)] {
			f := describeFeature("", st)
			fl.FirstSteps = append(fl.FirstSteps, inspectStep{Kind: f.Kind, Length: f.Length, Values: f.Values, Truncated: f.Truncated, text: f.text()})
		}
		out.FeatureLists = append(out.FeatureLists, fl)
	}
	return out
}

func describeFeature(key string, f *example.Feature) inspectFeature {
	out := inspectFeature{Key: key, Length: f.Len(), Values: []any{}}
	add := func(v any, shown string) {
		out.Values = append(out.Values, v)
		out.shown = append(out.shown, shown)
	}
	switch f.Kind {
	case example.KindInt64:
		out.Kind = "int64"
		for _, v := range f.Ints[:min(len(f.Ints), inspectMaxValues)] {
			add(v, strconv.FormatInt(v, 10))
		}
	case example.KindFloat:
		out.Kind = "float"
		for _, v := range f.Floats[:min(len(f.Floats), inspectMaxValues)] {
			// The float32's shortest form, which JSON has no type for
			// (NaN and the infinities, which JSON cannot hold, as text).
			t := strconv.FormatFloat(float64(v), 'g', -1, 32)
			if !strings.ContainsAny(t, ".eEIN") {
				// "2.0" and "-0.0", as write_jsonl writes them: Python's
				// json reads "2" as an int and "-0" as 0, losing the sign.
				t += ".0"
			}
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				add(t, t)
			} else {
				add(json.Number(t), t)
			}
		}
	case example.KindBytes:
		out.Kind = "bytes"
		for _, v := range f.Bytes[:min(len(f.Bytes), inspectMaxValues)] {
			p := bytesPreview(v)
			if q, err := strconv.Unquote(p); err == nil {
				add(q, p) // short text, whole
			} else {
				add(map[string]any{"bytes": len(v), "about": p}, p)
			}
		}
	default:
		// A Feature with no kind set: TFX writes one for a missing value.
		out.Kind = "none"
	}
	out.Truncated = out.Length > len(out.Values)
	return out
}

// bytesPreview shows a bytes value: an image by its format and size, text
// quoted, anything else as a short hex prefix, each long one with its total
// length.
func bytesPreview(b []byte) string {
	if cfg, err := imageops.DecodeConfig(b); err == nil {
		return fmt.Sprintf("%s %d×%d (%d bytes)", strings.ToUpper(cfg.Format), cfg.Width, cfg.Height, len(b))
	}
	if utf8.Valid(b) && !strings.ContainsFunc(string(b), func(r rune) bool { return unicode.IsControl(r) && r != '\n' && r != '\t' }) {
		if len(b) <= inspectMaxText {
			return strconv.Quote(string(b))
		}
		return quotePreview(b)
	}
	if len(b) <= inspectHexBytes {
		return "0x" + hex.EncodeToString(b)
	}
	return fmt.Sprintf("0x%s… (%d bytes)", hex.EncodeToString(b[:inspectHexBytes]), len(b))
}

// quotePreview quotes the start of b, cut at a rune boundary, with the total
// length when it is cut.
func quotePreview(b []byte) string {
	if len(b) <= inspectMaxText {
		return strconv.Quote(string(b))
	}
	cut := inspectMaxText
	for cut > 0 && !utf8.RuneStart(b[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d bytes)", strconv.Quote(string(b[:cut])), len(b))
}

func (rep *inspectReport) text(w io.Writer) {
	fmt.Fprintf(w, "file: %s\ncompression: %s\n", rep.File, rep.Compression)
	switch {
	case rep.DamagedCount > 0:
		fmt.Fprintf(w, "records: %d readable, %d damaged (under on_error: skip, each is skipped and counted)", rep.Records, rep.DamagedCount)
		switch {
		case rep.lastToEnd:
			fmt.Fprint(w, ", the last to the end of the file")
		case rep.Ended:
			fmt.Fprint(w, ", the last ending the file early")
		}
		switch {
		case rep.DamagedCount <= len(rep.Damaged):
			fmt.Fprintln(w, "; the errors follow")
		case rep.Ended:
			fmt.Fprintf(w, "; the first %d errors follow, then the last\n", len(rep.Damaged))
		default:
			fmt.Fprintf(w, "; the first %d errors follow\n", len(rep.Damaged))
		}
	default:
		fmt.Fprintf(w, "records: %d\n", rep.Records)
	}
	for _, r := range rep.Shown {
		if r.NotExample != "" {
			fmt.Fprintf(w, "record %d: not a tf.train.Example (%s); %d bytes\n", r.Index, r.NotExample, r.Bytes)
			continue
		}
		if len(r.FeatureLists) == 0 {
			fmt.Fprintf(w, "record %d: %d bytes, %d feature%s\n", r.Index, r.Bytes, len(r.Features), plural(len(r.Features)))
		} else {
			fmt.Fprintf(w, "record %d: %d bytes, a tf.train.SequenceExample: %d context feature%s, %d feature list%s\n",
				r.Index, r.Bytes, len(r.Features), plural(len(r.Features)), len(r.FeatureLists), plural(len(r.FeatureLists)))
		}
		width := 0
		for _, f := range r.Features {
			width = max(width, len(f.Key))
		}
		for _, l := range r.FeatureLists {
			width = max(width, len(l.Key))
		}
		for _, f := range r.Features {
			fmt.Fprintf(w, "  %-*s  %s\n", width, f.Key, f.text())
		}
		for _, l := range r.FeatureLists {
			steps := make([]string, len(l.FirstSteps))
			for i, f := range l.FirstSteps {
				steps[i] = f.text
			}
			if l.Steps > len(l.FirstSteps) {
				steps = append(steps, "…")
			}
			fmt.Fprintf(w, "  %-*s  list of %d step%s: %s\n", width, l.Key, l.Steps, plural(l.Steps), strings.Join(steps, "; "))
		}
	}
}

// text is a feature as the text format shows it, after its key.
func (f *inspectFeature) text() string {
	vals := strings.Join(f.shown, ", ")
	if f.Truncated {
		vals += ", …"
	}
	if f.Kind == "none" {
		vals = "(no kind set)"
	}
	return fmt.Sprintf("%-5s [%d]  %s", f.Kind, f.Length, vals)
}
