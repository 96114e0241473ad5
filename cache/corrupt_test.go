package cache

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/piperun/piperun/sample"
)

// corruptN samples are stored; corruptID is the one whose bytes are
// damaged on disk.
const (
	corruptN  = 20
	corruptID = 7
)

// bigSample is a sample well above the default 1 KiB ValueThreshold, so
// that Badger keeps it in the value log, with a payload that names its ID
// and can be found in the log's bytes.
func bigSample(id int64) *sample.Sample {
	return &sample.Sample{ID: id, Fields: map[string]any{
		"payload": bytes.Repeat([]byte(fmt.Sprintf("<payload of sample %04d>", id)), 200),
	}}
}

// fillAndCorrupt fills a real cache with corruptN big samples, closes it
// (complete or not), and flips bytes in the middle of sample corruptID's
// value in the value log files, as a failing disk or a stray write would.
func fillAndCorrupt(t *testing.T, dir string, complete bool) {
	t.Helper()
	fillBig(t, dir, complete)
	logs, err := filepath.Glob(filepath.Join(dir, "fp", badgerName, "*.vlog"))
	if err != nil || len(logs) == 0 {
		t.Fatalf("no value log in %s (%v): the samples are not where this test damages them", dir, err)
	}
	payload := bigSample(corruptID).Fields["payload"].([]byte)
	flipped := 0
	for _, name := range logs {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		at := bytes.Index(b, payload)
		if at < 0 {
			continue
		}
		for i := at + len(payload)/2; i < at+len(payload)/2+8; i++ {
			b[i] ^= 0xff
		}
		if err := os.WriteFile(name, b, 0o644); err != nil {
			t.Fatal(err)
		}
		flipped++
	}
	if flipped == 0 {
		t.Fatalf("sample %d's payload is in none of the value logs %v", corruptID, logs)
	}
}

// checkCorrupt checks that err reports sample id of c as corrupt (any
// sample when id is negative), in words that name the cache's directory
// and the way out.
func checkCorrupt(t *testing.T, what string, c *Cache, id int64, err error) {
	t.Helper()
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("%s: %v, want an error matching ErrCorrupt", what, err)
	}
	var ce *CorruptError
	if !errors.As(err, &ce) || ce.Dir != c.Dir() || (id >= 0 && ce.ID != id) || ce.ID < 0 || ce.ID >= corruptN {
		t.Fatalf("%s: %#v, want a *CorruptError for sample %d of %s", what, ce, id, c.Dir())
	}
	msg := err.Error()
	for _, want := range []string{c.Dir(), fmt.Sprintf("sample %d is corrupt", ce.ID), "checksum mismatch",
		"rm -r " + c.Dir(), "piperun cache prune " + filepath.Dir(c.Dir())} {
		if !strings.Contains(msg, want) {
			t.Errorf("%s: %q does not say %q", what, msg, want)
		}
	}
	if strings.Contains(msg, "empty buffer") {
		t.Errorf("%s: %q blames the decoder, not the disk", what, msg)
	}
}

// TestCorruptValueLog damages a stored sample in Badger's value log of a
// real cache. Badger does not fail the read: it logs the checksum mismatch
// (or, for a partial cache, whose writable open cuts the log at the damage,
// a read past the end) and hands back an empty value. Iterate, Get and Put
// (which looks up the size of the sample it replaces) must each report the
// sample as corrupt, naming the cache, instead of a decode error or a
// sample of 0 bytes.
func TestCorruptValueLog(t *testing.T) {
	for _, complete := range []bool{true, false} {
		t.Run(fmt.Sprintf("complete=%v", complete), func(t *testing.T) {
			dir := t.TempDir()
			fillAndCorrupt(t, dir, complete)
			var mu sync.Mutex
			var logged []string
			c := openT(t, dir, "fp", Options{Logf: func(f string, a ...any) {
				mu.Lock()
				defer mu.Unlock()
				logged = append(logged, fmt.Sprintf(f, a...))
			}})
			defer c.Close()
			if c.Manifest().Complete != complete || c.Count() != corruptN {
				t.Fatalf("reopened: complete %v, %d samples; want %v, %d", c.Manifest().Complete, c.Count(), complete, corruptN)
			}

			var seen []int64
			err := c.Iterate(context.Background(), func(s *sample.Sample) error {
				seen = append(seen, s.ID)
				return nil
			})
			_, found, gerr := c.Get(corruptID)
			checkCorrupt(t, "Get", c, corruptID, gerr)
			if found {
				t.Errorf("Get of a corrupt sample says found")
			}
			if !complete {
				// Badger's writable open truncates the value log at the
				// damaged entry, which also loses some samples around it
				// (which ones varies from run to run): each must read as
				// corrupt, whichever comes first.
				checkCorrupt(t, "Iterate", c, -1, err)
				if c.Has(corruptID) {
					t.Errorf("Has(%d) of a corrupt sample", corruptID)
				}
				checkCorrupt(t, "Put over it", c, corruptID, c.Put(corruptID, bigSample(corruptID)))
				return
			}

			checkCorrupt(t, "Iterate", c, corruptID, err)
			if len(seen) != corruptID {
				t.Errorf("Iterate gave samples %v before the corrupt one, want 0…%d", seen, corruptID-1)
			}
			// The read marked the cache damaged, which is what the
			// error's "prune --damaged" relies on.
			if ms, err := List(dir); err != nil || len(ms) != 1 || ms[0].Damaged != fmt.Sprintf("sample %d is corrupt", corruptID) {
				t.Errorf("List after the corrupt read: %+v, %v; want it marked damaged", ms, err)
			}
			// The damage is confined to one sample.
			if s, found, err := c.Get(corruptID + 1); err != nil || !found || !bytes.Equal(s.Fields["payload"].([]byte), bigSample(corruptID + 1).Fields["payload"].([]byte)) {
				t.Errorf("Get(%d) next to the corrupt sample: found %v, %v", corruptID+1, found, err)
			}
			// Badger's own words are the only place the cause is named;
			// they must reach Logf.
			mu.Lock()
			defer mu.Unlock()
			if !strings.Contains(strings.Join(logged, "\n"), "checksum mismatch") {
				t.Errorf("Logf did not get Badger's checksum error; it got %q", logged)
			}
		})
	}
}

// TestCorruptErrorEmptyValue checks the rule the read paths rely on: no
// sample encodes to an empty value, so an empty value is damage, while a
// decode failure is damage with its own cause.
func TestCorruptErrorEmptyValue(t *testing.T) {
	if b := Encode(nil, &sample.Sample{}); len(b) == 0 {
		t.Fatal("an empty sample encodes to no bytes")
	}
	c := &Cache{dir: filepath.Join("caches", "fp")}
	_, err := c.decodeStored(3, nil)
	var ce *CorruptError
	if !errors.As(err, &ce) || ce.ID != 3 || ce.Err != nil || !errors.Is(err, ErrCorrupt) {
		t.Errorf("empty value: %#v", err)
	}
	_, err = c.decodeStored(4, []byte{codecVersion, 8})
	if !errors.As(err, &ce) || ce.ID != 4 || ce.Err == nil || !errors.Is(err, errTruncated) {
		t.Errorf("truncated value: %#v", err)
	}
	want := `cache caches/fp: sample 3 is corrupt (checksum mismatch, truncated value or missing value log file); remove the directory (rm -r caches/fp) ` +
		`or run "piperun cache prune caches --damaged", then run again to refill it`
	if got := c.corrupt(3, nil).Error(); got != want {
		t.Errorf("message\n%s\nwant\n%s", got, want)
	}
}

// listDamaged is what List says of the one cache under dir: Damaged and
// LastUsed.
func listDamaged(t *testing.T, dir string) (string, time.Time) {
	t.Helper()
	ms, err := List(dir)
	if err != nil || len(ms) != 1 {
		t.Fatalf("List = %+v, %v", ms, err)
	}
	return ms[0].Damaged, ms[0].LastUsed
}

// TestSharedReadersKeepTheMark has two processes' worth of readers share
// a complete cache with a corrupt sample. A's read marks it; B, closing,
// writes its LastUsed, and must not take the mark away (each reader once
// wrote back the manifest it had read when it opened, with no mark); nor
// must a reader that opens the cache while A reads it, which shares it as
// A does. Only the manifest's LastUsed is B's to change.
func TestSharedReadersKeepTheMark(t *testing.T) {
	dir := t.TempDir()
	fillAndCorrupt(t, dir, true)
	at := func(h int) Options {
		now := time.Date(2025, 6, 1, h, 0, 0, 0, time.UTC)
		return Options{Now: func() time.Time { return now }}
	}
	a := openT(t, dir, "fp", at(1))
	b := openT(t, dir, "fp", at(2))
	if !a.shared || !b.shared {
		t.Fatalf("shared: A %v, B %v; want both readers of the complete cache", a.shared, b.shared)
	}
	err := a.Iterate(context.Background(), func(*sample.Sample) error { return nil })
	checkCorrupt(t, "A's Iterate", a, corruptID, err)
	want := fmt.Sprintf("sample %d is corrupt", corruptID)
	if got, _ := listDamaged(t, dir); got != want {
		t.Fatalf("after A's read: Damaged %q, want %q", got, want)
	}

	mustNil(t, b.Close())
	got, used := listDamaged(t, dir)
	if got != want {
		t.Errorf("after B closed: Damaged %q, want %q", got, want)
	}
	if !used.Equal(at(2).Now()) {
		t.Errorf("after B closed: LastUsed %v, want B's %v", used, at(2).Now())
	}

	c := openT(t, dir, "fp", at(3))
	if !c.shared {
		t.Error("a reader of the marked cache, opened while A reads it, does not share it")
	}
	if m := c.Manifest(); m.Damaged != want {
		t.Errorf("the third reader's manifest: Damaged %q, want %q", m.Damaged, want)
	}
	if got, _ := listDamaged(t, dir); got != want {
		t.Errorf("after a third reader opened: Damaged %q, want %q", got, want)
	}
	mustNil(t, c.Close())
	mustNil(t, a.Close())
	if got, used := listDamaged(t, dir); got != want || !used.Equal(at(1).Now()) {
		t.Errorf("after all closed: Damaged %q, LastUsed %v; want %q, A's %v", got, used, want, at(1).Now())
	}

	// Opened alone, the cache is tried again: its store opens, so the
	// mark goes, and the read that finds the sample corrupt marks it
	// again.
	d := openT(t, dir, "fp", Options{})
	if got, _ := listDamaged(t, dir); got != "" {
		t.Errorf("opened alone: Damaged %q, want the mark tried again", got)
	}
	_, _, err = d.Get(corruptID)
	checkCorrupt(t, "Get", d, corruptID, err)
	mustNil(t, d.Close())
	if got, _ := listDamaged(t, dir); got != want {
		t.Errorf("after the read: Damaged %q, want %q", got, want)
	}
}

// TestCorruptMarksOnlyItsOwnCache hands Iterate of a healthy cache a
// function that fails with another cache's CorruptError, as a pipeline
// reading from two caches may: the healthy cache must not be marked.
func TestCorruptMarksOnlyItsOwnCache(t *testing.T) {
	bad, good := t.TempDir(), t.TempDir()
	fillAndCorrupt(t, bad, true)
	writeComplete(t, good, 5)
	cb := openT(t, bad, "fp", Options{})
	defer cb.Close()
	_, _, cerr := cb.Get(corruptID)
	checkCorrupt(t, "Get", cb, corruptID, cerr)

	cg := openT(t, good, "fp", Options{})
	err := cg.Iterate(context.Background(), func(*sample.Sample) error { return fmt.Errorf("downstream: %w", cerr) })
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Iterate: %v, want the function's error", err)
	}
	mustNil(t, cg.Close())
	if got, _ := listDamaged(t, good); got != "" {
		t.Errorf("the healthy cache is marked: %q", got)
	}
	if got, _ := listDamaged(t, bad); got != fmt.Sprintf("sample %d is corrupt", corruptID) {
		t.Errorf("the corrupt cache: Damaged %q", got)
	}
}
