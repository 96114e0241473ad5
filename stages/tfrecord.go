package stages

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/piperun/piperun/plan"
	"github.com/piperun/piperun/sample"
	"github.com/piperun/piperun/spec"
	"github.com/piperun/piperun/tfrecord"
)

// The hooks this file's types provide, checked by the compiler: the
// engine and planner find them by type assertion, where a changed
// signature would silently turn a hook off.
var (
	_ spec.Checker  = (*TFRecordConfig)(nil)
	_ plan.Reserver = (*TFRecordConfig)(nil)
	_ Closer        = (*recordStream)(nil)
	_ Stream        = (*recordStream)(nil)
	_ Expander      = (*tfrecordStage)(nil)
)

// TFRecordConfig configures the tfrecord reader.
type TFRecordConfig struct {
	Field       string    `yaml:"field" jsonschema_description:"Input field holding the file path (default path)."`
	Compression string    `yaml:"compression" jsonschema:"enum=auto,enum=none,enum=gzip,enum=zlib,enum=AUTO,enum=NONE,enum=GZIP,enum=ZLIB" jsonschema_description:"auto (from magic bytes and extension), none, gzip or zlib (or in capitals, as tf.data writes them)."`
	CycleLength spec.Auto `yaml:"cycle_length" jsonschema_description:"Files read at once, interleaved; auto = 8 on every machine, so the order does not depend on the core count."`
	BlockLength int       `yaml:"block_length" jsonschema:"minimum=1" jsonschema_description:"Consecutive records taken from one file before moving to the next (default 1)."`
}

func init() {
	register(&Type{
		StageType: spec.StageType{Name: "tfrecord", Role: spec.RoleTransform, Doc: "Reads TFRecord files into {record} bytes: framing and masked CRC-32C checked, compression, interleave.",
			NewConfig: func() any { return &TFRecordConfig{Field: "path", Compression: "auto", BlockLength: 1} }, OnError: true, Parallel: true},
		Build: func(env *Env, cfg any) (any, error) {
			c := cfg.(*TFRecordConfig)
			comp, auto, err := tfrecord.ParseCompression(c.Compression)
			if err != nil {
				return nil, err
			}
			// Under on_error: skip a bad header costs the bytes up to the
			// next valid record, not the rest of the file; under fail the
			// run stops at it, so there is nothing to scan for.
			resync := env.Stage != nil && env.Stage.Skip()
			return &tfrecordStage{cfg: c, comp: comp, auto: auto, resync: resync, cycle: c.CycleLength.Resolve(DefaultCycleLength)}, nil
		},
	})
}

// Check implements spec.Checker.
func (c *TFRecordConfig) Check(cc *spec.CheckContext) sample.Schema {
	checkPathField(cc, c.Field)
	comp, auto, err := tfrecord.ParseCompression(c.Compression)
	if err != nil {
		cc.Errorf("compression", "%v", err)
	} else if cc.Environment && !auto {
		checkCompression(cc, comp, c.Field)
	}
	if c.BlockLength < 1 {
		cc.Errorf("block_length", "must be at least 1, got %d", c.BlockLength)
	}
	checkCycle(cc, c.CycleLength)
	return sample.Schema{Fields: []sample.Field{{Name: "record", Type: sample.TBytes}}}
}

// ReservedBytes implements plan.Reserver: the buffers and decompressor of
// each file the interleave holds open are no samples, and were held
// beyond the budget (a re-test: cycle_length 600 under 8 MiB reached 408
// MiB). auto counts every file as compressed.
func (c *TFRecordConfig) ReservedBytes(int64) int64 {
	comp, auto, err := tfrecord.ParseCompression(c.Compression)
	if err != nil || auto {
		comp = tfrecord.Gzip
	}
	return int64(c.CycleLength.Resolve(DefaultCycleLength)) * tfrecord.OpenBytes(comp)
}

// ReservedFor implements plan.Reserver.
func (c *TFRecordConfig) ReservedFor() string { return openFiles(c.CycleLength) }

// checkCompression reads the head of the first file the files stage above
// matched, and refuses a compression it does not start with: the run
// fails there (a review: validate passed compression: none over gzipped
// files, and apply failed at once). Under on_error: skip, which reads on
// past such files, it is a warning.
func checkCompression(cc *spec.CheckContext, comp tfrecord.Compression, field string) {
	if field != "path" {
		return // not the files stage's field
	}
	st := cc.Stage
	for len(st.Inputs) == 1 {
		st = st.Inputs[0]
		fc, ok := st.Config.(*FilesConfig)
		if !ok {
			// Only through stages that pass the paths on as they are:
			// a map may name other files (a review: path + ".gz").
			if !passesPaths[st.Type] {
				return
			}
			continue
		}
		if fc.first == "" {
			return
		}
		f, err := os.Open(fc.first)
		if err != nil {
			return // files says why it cannot be read
		}
		head := make([]byte, 16)
		n, _ := io.ReadFull(f, head)
		f.Close()
		if like := tfrecord.LooksLike(head[:n], comp); like != "" {
			msg := fmt.Sprintf("%s, the first file stage %q matches, is read with compression %s%s", fc.first, st.Name, comp, like)
			if cc.Stage.Skip() {
				cc.Warnf("compression", "%s; under on_error: skip such files are skipped", msg)
			} else {
				cc.Errorf("compression", "%s", msg)
			}
		}
		return
	}
}

// passesPaths are the stage types that pass on every path of the files
// stage above them as it was, so that its first file is read: a skip,
// take or filter may drop it (a re-test: a skip of the one gzipped file
// before compression: none was refused).
var passesPaths = map[string]bool{"shuffle": true, "prefetch": true, "cache": true}

// checkPathField checks that the input carries a string field naming files.
func checkPathField(cc *spec.CheckContext, field string) {
	t, ok := cc.Input().Lookup(field)
	switch {
	case !ok:
		cc.Errorf("field", "input has no field %q to read paths from (fields here: %v)", field, cc.Input().Names())
	case t.Kind != sample.String && t.Kind != sample.Any:
		cc.Errorf("field", "field %q is %s; it must be a string path", field, t)
	}
}

type tfrecordStage struct {
	cfg    *TFRecordConfig
	comp   tfrecord.Compression
	auto   bool
	resync bool
	cycle  int
}

func (t *tfrecordStage) Interleave() (int, int) { return t.cycle, t.cfg.BlockLength }

func (t *tfrecordStage) Open(_ context.Context, in *sample.Sample) (Stream, error) {
	path, err := pathOf(in, t.cfg.Field)
	if err != nil {
		return nil, err
	}
	r, c, err := tfrecord.Open(path, t.comp, t.auto)
	if err != nil {
		return nil, err
	}
	r.SetResync(t.resync)
	return &recordStream{r: r, c: c, path: path, epoch: in.Epoch}, nil
}

type recordStream struct {
	r     *tfrecord.Reader
	c     io.Closer
	path  string
	epoch int
}

func (s *recordStream) Next() (*sample.Sample, error) {
	i := s.r.Index()
	rec, err := s.r.Next()
	if err != nil {
		// A payload that fails its checksum spoils that record alone: the
		// frame around it was read, so the stream reads on when skipped.
		// So does a bad header the reader resynchronised after: its error
		// already says how many bytes that cost, and the skip counts it
		// as one.
		if ce := (*tfrecord.CorruptError)(nil); errors.As(err, &ce) && ce.ReadsOn() {
			return nil, &ItemError{Err: err}
		}
		return nil, err
	}
	return &sample.Sample{Epoch: s.epoch, Origin: fmt.Sprintf("%s record %d", s.path, i), Fields: map[string]any{"record": rec}}, nil
}

func (s *recordStream) Close() error { return s.c.Close() }
