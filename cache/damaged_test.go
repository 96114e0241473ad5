package cache

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/piperun/piperun/sample"
)

// fillDay opens dir/fp as of day i after base, puts n test samples,
// completes it and closes it.
func fillDay(t *testing.T, dir, fp string, base time.Time, i int, n int64) {
	t.Helper()
	now := base.Add(time.Duration(i) * 24 * time.Hour)
	c, err := Open(dir, fp, Manifest{Pipeline: "p", Stage: fp}, Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	putN(t, c, n)
	if err := c.MarkComplete(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

// damagedMessage is DamagedError's text for the cache dir/fp.
func damagedMessage(dir, fp, reason string) string {
	path := filepath.Join(dir, fp)
	return "cache " + path + " is damaged: " + reason + "; remove it (rm -r " + path + `) or run "piperun cache prune ` +
		dir + ` --damaged", then run again to refill it`
}

// TestDamagedManifest replaces one real cache's manifest with garbage and
// another's with a manifest naming some other fingerprint: Open refuses
// each with a DamagedError naming the file, List still lists every cache,
// the damaged ones marked, and Prune removes the damaged ones whatever
// their age, keeping the keepLast healthy ones.
func TestDamagedManifest(t *testing.T) {
	dir := t.TempDir()
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, fp := range []string{"old", "garbage", "misnamed", "new"} {
		fillDay(t, dir, fp, base, i, 5)
	}
	garbage := filepath.Join(dir, "garbage", manifestName)
	if err := os.WriteFile(garbage, []byte("garbage\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	misnamedMan, err := readManifest(filepath.Join(dir, "misnamed"))
	if err != nil {
		t.Fatal(err)
	}
	misnamedMan.Fingerprint = "elsewhere"
	if err := writeManifest(filepath.Join(dir, "misnamed"), misnamedMan); err != nil {
		t.Fatal(err)
	}

	parse := "manifest " + garbage + " does not parse (invalid character 'g' looking for beginning of value)"
	misnamedWhy := "manifest " + filepath.Join(dir, "misnamed", manifestName) + ` names fingerprint "elsewhere", not "misnamed"`
	for fp, reason := range map[string]string{"garbage": parse, "misnamed": misnamedWhy} {
		_, err := Open(dir, fp, testMeta, Options{})
		if !errors.Is(err, ErrDamaged) {
			t.Fatalf("Open(%s): %v, want ErrDamaged", fp, err)
		}
		if want := damagedMessage(dir, fp, reason); err.Error() != want {
			t.Errorf("Open(%s):\n%s\nwant\n%s", fp, err, want)
		}
	}
	if b, err := os.ReadFile(garbage); err != nil || string(b) != "garbage\n" {
		t.Errorf("Open rewrote the damaged manifest: %q, %v", b, err)
	}

	ms, err := List(dir)
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	got := map[string]Manifest{}
	for _, m := range ms {
		got[m.Fingerprint] = m
	}
	if len(ms) != 4 || got["old"].Damaged != "" || got["new"].Damaged != "" || !got["new"].Complete ||
		got["garbage"].Damaged != parse || got["misnamed"].Damaged != misnamedWhy {
		t.Fatalf("List = %+v", ms)
	}
	// An unreadable manifest's file time stands in for when it was used.
	if fi, err := os.Stat(garbage); err != nil || !got["garbage"].LastUsed.Equal(fi.ModTime()) {
		t.Errorf("garbage LastUsed %v, want the file's time (%v)", got["garbage"].LastUsed, err)
	}

	// On day 10, with no age limit to speak of, keeping the last healthy
	// one: the damaged ones go, and so does "old", the second healthy
	// one; damaged ones are not counted among the kept.
	removed, inUse, err := Prune(dir, 365*24*time.Hour, 1, base.Add(10*24*time.Hour))
	if err != nil || len(inUse) != 0 {
		t.Fatalf("Prune: %v, in use %+v", err, inUse)
	}
	var names []string
	for _, m := range removed {
		names = append(names, m.Fingerprint)
	}
	// Their order is their manifests' file times, which may tie or not
	// (a file system's clock ticks coarsely): no part of the check.
	slices.Sort(names)
	if strings.Join(names, ",") != "garbage,misnamed" {
		t.Errorf("Prune removed %v, want garbage and misnamed", names)
	}
	left, _ := filepath.Glob(filepath.Join(dir, "*"))
	if len(left) != 2 || filepath.Base(left[0]) != "new" || filepath.Base(left[1]) != "old" {
		t.Errorf("left %v, want new and old", left)
	}
	removed, _, err = Prune(dir, 0, 1, base.Add(10*24*time.Hour))
	if err != nil || len(removed) != 1 || removed[0].Fingerprint != "old" {
		t.Errorf("second Prune = %+v, %v; want old", removed, err)
	}
}

// TestDamagedCacheInUseIsKept: Prune never removes a cache a process
// holds, damaged or not.
func TestDamagedCacheInUseIsKept(t *testing.T) {
	dir := t.TempDir()
	writeComplete(t, dir, 5)
	c := openT(t, dir, "fp", Options{}) // complete: held shared, as a reader
	defer c.Close()
	if err := os.WriteFile(filepath.Join(dir, "fp", manifestName), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	removed, inUse, err := Prune(dir, 0, 0, time.Now())
	if err != nil || len(removed) != 0 || len(inUse) != 1 || inUse[0].Fingerprint != "fp" || inUse[0].Damaged == "" {
		t.Fatalf("Prune = %+v, %+v, %v; want fp kept, in use", removed, inUse, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "fp", badgerName)); err != nil {
		t.Errorf("the cache in use lost its store: %v", err)
	}
}

// TestMissingTableFile deletes the table file of a real cache: Open fails
// with a DamagedError naming the store instead of Badger's bare "file does
// not exist for table 1", and records the damage in the manifest, so that
// List shows it and Prune removes it whatever its age. A cache whose
// store opens again is no longer marked.
func TestMissingTableFile(t *testing.T) {
	dir := t.TempDir()
	writeComplete(t, dir, 20)
	store := filepath.Join(dir, "fp", badgerName)
	tables, err := filepath.Glob(filepath.Join(store, "*.sst"))
	if err != nil || len(tables) != 1 || filepath.Base(tables[0]) != "000001.sst" {
		t.Fatalf("table files %v (%v), want 000001.sst alone", tables, err)
	}
	saved, err := os.ReadFile(tables[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(tables[0]); err != nil {
		t.Fatal(err)
	}
	_, err = Open(dir, "fp", testMeta, Options{})
	reason := "its Badger store " + store + " does not open (file does not exist for table 1)"
	if !errors.Is(err, ErrDamaged) || err.Error() != damagedMessage(dir, "fp", reason) {
		t.Fatalf("Open: %v\nwant %s", err, damagedMessage(dir, "fp", reason))
	}
	ms, err := List(dir)
	if err != nil || len(ms) != 1 || ms[0].Damaged != reason || ms[0].Samples != 20 || ms[0].Pipeline != "p" {
		t.Fatalf("List = %+v, %v; want fp marked damaged, its counts kept", ms, err)
	}

	// Put back, the store opens, and the mark goes.
	if err := os.WriteFile(tables[0], saved, 0o644); err != nil {
		t.Fatal(err)
	}
	c := openT(t, dir, "fp", Options{})
	checkContents(t, c, 20)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if ms, _ := List(dir); len(ms) != 1 || ms[0].Damaged != "" {
		t.Fatalf("after repair List = %+v", ms)
	}

	if err := os.Remove(tables[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, "fp", testMeta, Options{}); !errors.Is(err, ErrDamaged) {
		t.Fatalf("Open: %v", err)
	}
	// Used just now, yet removed: a damaged cache has no age worth keeping.
	removed, _, err := Prune(dir, 24*time.Hour, 5, time.Now())
	if err != nil || len(removed) != 1 || removed[0].Damaged != reason {
		t.Fatalf("Prune = %+v, %v", removed, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "fp")); !os.IsNotExist(err) {
		t.Errorf("fp is still there: %v", err)
	}
}

// TestMissingValueLog deletes the value log of a real cache holding big
// samples. Badger opens it and hands back empty values: the first read
// reports the sample corrupt, naming the missing file among the causes,
// and marks the cache damaged for List and Prune.
func TestMissingValueLog(t *testing.T) {
	dir := t.TempDir()
	c := openT(t, dir, "fp", Options{})
	for id := int64(0); id < corruptN; id++ {
		if err := c.Put(id, bigSample(id)); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.MarkComplete(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	logs, err := filepath.Glob(filepath.Join(dir, "fp", badgerName, "*.vlog"))
	if err != nil || len(logs) == 0 {
		t.Fatalf("no value log: %v", err)
	}
	for _, l := range logs {
		if err := os.Remove(l); err != nil {
			t.Fatal(err)
		}
	}
	c = openT(t, dir, "fp", Options{})
	err = c.Iterate(context.Background(), func(*sample.Sample) error { return nil })
	checkCorrupt(t, "Iterate", c, 0, err)
	if !strings.Contains(err.Error(), "(checksum mismatch, truncated value or missing value log file)") {
		t.Errorf("Iterate: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	ms, err := List(dir)
	if err != nil || len(ms) != 1 || ms[0].Damaged != "sample 0 is corrupt" {
		t.Fatalf("List = %+v, %v", ms, err)
	}
	if removed, _, err := Prune(dir, time.Hour, 3, time.Now()); err != nil || len(removed) != 1 {
		t.Fatalf("Prune = %+v, %v", removed, err)
	}
}

// fillBig fills the cache dir/fp with corruptN big samples, so that
// Badger keeps them in its value log, and closes it, complete or not.
func fillBig(t testing.TB, dir string, complete bool) {
	t.Helper()
	c := openT(t, dir, "fp", Options{})
	for id := int64(0); id < corruptN; id++ {
		if err := c.Put(id, bigSample(id)); err != nil {
			t.Fatal(err)
		}
	}
	if complete {
		if err := c.MarkComplete(); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

// storeFile is the one file of a real store matching pattern.
func storeFile(t *testing.T, store, pattern string) string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(store, pattern))
	if err != nil || len(names) != 1 {
		t.Fatalf("%s in %s: %v (%v), want one", pattern, store, names, err)
	}
	return names[0]
}

// cutHalf truncates file to half its size.
func cutHalf(t *testing.T, file string) {
	t.Helper()
	fi, err := os.Stat(file)
	mustNil(t, err)
	mustNil(t, os.Truncate(file, fi.Size()/2))
}

// flipByte inverts the byte of file at the offset that at gives for its
// contents.
func flipByte(t *testing.T, file string, at func(b []byte) int) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	b[at(b)] ^= 0xff
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestDamagedStoreFiles damages the files of real Badger stores, complete
// caches and partial ones, in each way Badger words as damage when it
// opens them: Open must fail with a DamagedError quoting Badger's words,
// and mark the cache for List and Prune. Damage Badger opens without a
// word (a value log deleted or cut short) must show as a corrupt sample
// when read, marked too. A store that does not open for a reason not
// known to mean damage (its MANIFEST a directory) must fail as it is, and
// not be marked.
func TestDamagedStoreFiles(t *testing.T) {
	indexMiddle := func(b []byte) int {
		// A table ends with its index, the index's length, a checksum of
		// the index and the checksum's length.
		n := len(b)
		sumLen := int(binary.BigEndian.Uint32(b[n-4:]))
		lenAt := n - 4 - sumLen - 4
		return lenAt - int(binary.BigEndian.Uint32(b[lenAt:]))/2
	}
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, store string)
		// words are Badger's, in the reason of the DamagedError; "" when
		// the store opens and read finds a corrupt sample; "-" when the
		// open fails and the cache must not be marked.
		words string
	}{
		{"table file deleted", func(t *testing.T, store string) {
			mustNil(t, os.Remove(storeFile(t, store, "*.sst")))
		}, "file does not exist for table 1"},
		{"garbage in MANIFEST", func(t *testing.T, store string) {
			mustNil(t, os.WriteFile(filepath.Join(store, "MANIFEST"), []byte("not Badger's"), 0o644))
		}, "manifest has bad magic"},
		{"MANIFEST cut short", func(t *testing.T, store string) {
			mustNil(t, os.Truncate(filepath.Join(store, "MANIFEST"), 4))
		}, "manifest has bad magic"},
		{"MANIFEST checksum", func(t *testing.T, store string) {
			flipByte(t, filepath.Join(store, "MANIFEST"), func(b []byte) int { return len(b) - 1 })
		}, "manifest has checksum mismatch"},
		{"KEYREGISTRY empty", func(t *testing.T, store string) {
			mustNil(t, os.Truncate(filepath.Join(store, "KEYREGISTRY"), 0))
		}, "Error while reading IV for key registry. err: EOF"},
		{"garbage in KEYREGISTRY", func(t *testing.T, store string) {
			mustNil(t, os.WriteFile(filepath.Join(store, "KEYREGISTRY"), bytes.Repeat([]byte("not Badger's "), 4), 0o644))
		}, "Encryption key mismatch"},
		{"table footer", func(t *testing.T, store string) {
			// The checksum's length, the last 4 bytes, now far beyond the file.
			flipByte(t, storeFile(t, store, "*.sst"), func(b []byte) int { return len(b) - 4 })
		}, "table 000001.sst: not a Badger table: its footer gives a checksum of "},
		{"table cut short", func(t *testing.T, store string) {
			cutHalf(t, storeFile(t, store, "*.sst"))
		}, "table 000001.sst:"},
		{"table empty", func(t *testing.T, store string) {
			mustNil(t, os.Truncate(storeFile(t, store, "*.sst"), 0))
		}, "table 000001.sst: not a Badger table: 0 bytes, shorter than a table's footer"},
		{"table index", func(t *testing.T, store string) {
			flipByte(t, storeFile(t, store, "*.sst"), indexMiddle)
		}, "checksum mismatch"},
		{"value log header", func(t *testing.T, store string) {
			flipByte(t, storeFile(t, store, "*.vlog"), func([]byte) int { return 3 })
		}, "Invalid datakey id"},
		{"value log empty", func(t *testing.T, store string) {
			mustNil(t, os.Truncate(storeFile(t, store, "*.vlog"), 0))
		}, "Create a new file"},
		{"value log deleted", func(t *testing.T, store string) {
			mustNil(t, os.Remove(storeFile(t, store, "*.vlog")))
		}, ""},
		{"value log cut short", func(t *testing.T, store string) {
			cutHalf(t, storeFile(t, store, "*.vlog"))
		}, ""},
		{"MANIFEST a directory", func(t *testing.T, store string) {
			mustNil(t, os.Remove(filepath.Join(store, "MANIFEST")))
			mustNil(t, os.Mkdir(filepath.Join(store, "MANIFEST"), 0o755))
		}, "-"},
	} {
		for _, complete := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/complete=%v", tc.name, complete), func(t *testing.T) {
				dir := t.TempDir()
				fillBig(t, dir, complete)
				store := filepath.Join(dir, "fp", badgerName)
				tc.damage(t, store)
				var logged []string
				c, err := Open(dir, "fp", testMeta, Options{Logf: func(format string, args ...any) {
					logged = append(logged, fmt.Sprintf(format, args...))
				}})
				// Badger's words can hold the system's newlines, which
				// broke a log line and a listing in two.
				for _, l := range logged {
					if strings.Contains(strings.TrimSuffix(l, "\n"), "\n") {
						t.Errorf("a log line in two: %q", l)
					}
				}
				switch tc.words {
				case "":
					if err != nil {
						t.Fatalf("Open: %v; want the store to open", err)
					}
					err = c.Iterate(context.Background(), func(*sample.Sample) error { return nil })
					checkCorrupt(t, "Iterate", c, -1, err)
					mustNil(t, c.Close())
				case "-":
					if err == nil || errors.Is(err, ErrDamaged) {
						t.Fatalf("Open: %v; want a plain error", err)
					}
				default:
					var de *DamagedError
					if !errors.As(err, &de) || !strings.Contains(de.Reason, "its Badger store "+store+" does not open (") ||
						!strings.Contains(de.Reason, tc.words) || strings.Contains(de.Reason, "\n") {
						t.Fatalf("Open: %v; want a DamagedError saying %q", err, tc.words)
					}
				}
				ms, err := List(dir)
				if err != nil || len(ms) != 1 {
					t.Fatalf("List = %+v, %v", ms, err)
				}
				switch got := ms[0].Damaged; {
				case tc.words == "-" && got != "":
					t.Errorf("marked damaged: %q", got)
				case tc.words == "" && !(strings.HasPrefix(got, "sample ") && strings.HasSuffix(got, " is corrupt")):
					t.Errorf("Damaged = %q, want a corrupt sample", got)
				case tc.words != "" && tc.words != "-" && !strings.Contains(got, tc.words):
					t.Errorf("Damaged = %q, want Badger's %q", got, tc.words)
				}
				removed, _, err := Prune(dir, time.Hour, 5, time.Now())
				if err != nil || len(removed) != map[bool]int{true: 0, false: 1}[tc.words == "-"] {
					t.Errorf("Prune removed %+v, %v", removed, err)
				}
			})
		}
	}
}

// TestBadgerDamage checks the words badgerDamage goes by: damage Badger
// names, unless the system's refusal is what it wraps, flattened into
// text or not; anything else is not damage.
func TestBadgerDamage(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{errors.New("file does not exist for table 1"), true},
		{errors.New("manifest has bad magic"), true},
		{errors.New(`Opening table: "/c/fp/badger/000001.sst" err: failed to initialize table err: failed to read index. err: failed to verify checksum for table: /c/fp/badger/000001.sst err: actual: 1, expected: 2 err: checksum mismatch`), true},
		{errors.New("Error while reading IV for key registry. err: EOF"), true},
		// The system's refusals, in Badger's flattened words.
		{errors.New("Error while opening key registry. err: open /c/fp/badger/KEYREGISTRY: too many open files"), false},
		{errors.New("Error while reading IV for key registry. err: read /c/fp/badger/KEYREGISTRY: input/output error"), false},
		{errors.New(`Cannot write pid file "/c/fp/badger/LOCK" err: open /c/fp/badger/LOCK: permission denied`), false},
		{errors.New("while opening memtables err: Unable to open mem dir.. Path=/c. Error=open /c: cannot allocate memory"), false},
		{errors.New("During db.vlog.open err: Error while creating log file in valueLog.open err: write /c/x: no space left on device"), false},
		{errors.New("While opening directory: /c/fp/badger. err: open /c/fp/badger: read-only file system"), false},
		// Wrapped, with its errno, even under words of damage.
		{fmt.Errorf("manifest has bad magic: %w", &os.PathError{Op: "read", Path: "/c", Err: syscall.EIO}), false},
		{&os.PathError{Op: "open", Path: "/c/fp/badger/MANIFEST", Err: syscall.EISDIR}, false},
		// Words not known to mean damage.
		{errors.New("something Badger never said before"), false},
	} {
		if got := badgerDamage(tc.err); got != tc.want {
			t.Errorf("badgerDamage(%q) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// TestUnreadableManifestIsKept puts a directory where a real cache's
// manifest should be, which no user running as root can be kept from
// reading: its read fails (EISDIR), as one refused by permissions or by a
// failing disk does. That says nothing about the cache, so List shows it
// unreadable, not damaged, and Prune keeps it whatever its age and counts
// it for none of keepLast; Open fails as the read did, marking nothing.
func TestUnreadableManifestIsKept(t *testing.T) {
	dir := t.TempDir()
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, fp := range []string{"old", "unreadable", "new"} {
		fillDay(t, dir, fp, base, i, 5)
	}
	man := filepath.Join(dir, "unreadable", manifestName)
	mustNil(t, os.Remove(man))
	mustNil(t, os.Mkdir(man, 0o755))

	ms, err := List(dir)
	if err != nil || len(ms) != 3 {
		t.Fatalf("List = %+v, %v", ms, err)
	}
	got := map[string]Manifest{}
	for _, m := range ms {
		got[m.Fingerprint] = m
	}
	u := got["unreadable"]
	if want := "read " + man + ": is a directory"; u.Unreadable != want || u.Damaged != "" {
		t.Errorf("unreadable: Unreadable %q, Damaged %q; want %q and not damaged", u.Unreadable, u.Damaged, want)
	}
	if got["old"].Unreadable != "" || got["new"].Unreadable != "" || got["new"].Damaged != "" {
		t.Errorf("List = %+v", ms)
	}

	if _, err := Open(dir, "unreadable", testMeta, Options{}); err == nil || errors.Is(err, ErrDamaged) ||
		!strings.Contains(err.Error(), "is a directory") {
		t.Errorf("Open: %v; want the read's error", err)
	}
	// Ten days on, keeping the last one, with no age limit to speak of:
	// "old" goes, being second of the healthy ones; the unreadable one
	// stays, and is not the one kept.
	removed, inUse, err := Prune(dir, 0, 1, base.Add(10*24*time.Hour))
	if err != nil || len(inUse) != 0 || len(removed) != 1 || removed[0].Fingerprint != "old" {
		t.Fatalf("Prune = %+v, %+v, %v; want old removed", removed, inUse, err)
	}
	removed, _, err = Prune(dir, 0, 0, base.Add(10*24*time.Hour))
	if err != nil || len(removed) != 1 || removed[0].Fingerprint != "new" {
		t.Fatalf("Prune of all = %+v, %v; want new removed", removed, err)
	}
	if fi, err := os.Stat(man); err != nil || !fi.IsDir() {
		t.Errorf("the unreadable cache was touched: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "unreadable", badgerName)); err != nil {
		t.Errorf("the unreadable cache lost its store: %v", err)
	}
}

// TestDamageThatCannotBeRecorded: where the manifest cannot record the
// damage (a read-only cache), the error says so and to remove the
// directory, not to run "prune --damaged", which would find nothing to
// remove.
func TestDamageThatCannotBeRecorded(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "gone", "0123456789abcdef") // no folder to write a manifest in
	c := &Cache{dir: dir, man: Manifest{Fingerprint: "0123456789abcdef"}}
	ce := c.corrupt(5, nil)
	c.markCorrupt(ce)
	want := "cache " + dir + ": sample 5 is corrupt (checksum mismatch, truncated value or missing value log file); its manifest could not record the damage (read-only?), so \"piperun cache prune --damaged\" does not know of it: remove the directory (rm -r " + dir + "), then run again to refill it"
	if !ce.Unrecorded || ce.Error() != want {
		t.Errorf("got %q\nwant %q", ce.Error(), want)
	}
	de := &DamagedError{Dir: dir, Reason: "manifest is not JSON"}
	c.man.Damaged = ""
	c.markDamaged(de)
	want = "cache " + dir + " is damaged: manifest is not JSON; its manifest could not record the damage (read-only?), so \"piperun cache prune --damaged\" does not know of it: remove the directory (rm -r " + dir + "), then run again to refill it"
	if !de.Unrecorded || de.Error() != want {
		t.Errorf("got %q\nwant %q", de.Error(), want)
	}
	// Recorded, the advice is prune's.
	ok := t.TempDir()
	c = &Cache{dir: filepath.Join(ok, "0123456789abcdef"), man: Manifest{Fingerprint: "0123456789abcdef"}}
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ce = c.corrupt(5, nil)
	c.markCorrupt(ce)
	if ce.Unrecorded || !strings.Contains(ce.Error(), "or run \"piperun cache prune "+ok+" --damaged\"") {
		t.Errorf("recorded damage: %q", ce.Error())
	}
}
