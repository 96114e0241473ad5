//go:build linux

package tensor

import (
	"testing"
	"time"
)

// TestProbeHugePages checks that the probe measures both kinds of page on
// Linux and that AdviseHuge's choice follows what it measured.
func TestProbeHugePages(t *testing.T) {
	huge, small, ok := ProbeHugePages()
	if !ok {
		t.Skip("no transparent huge pages to probe here")
	}
	if small <= 0 || small > time.Second || huge < 0 || huge > time.Second {
		t.Fatalf("probe: huge %v, 4 KiB %v: want 4 KiB between 0 and 1s, huge not over 1s", huge, small)
	}
	if huge > 0 && small < cheapSmall {
		t.Errorf("probe: 4 KiB pages took %v (cheap under %v), huge %v: want huge pages not tried when 4 KiB pages are cheap", small, cheapSmall, huge)
	}
	if huge == 0 && small >= cheapSmall {
		// Where madvise refuses MADV_HUGEPAGE (transparent huge pages
		// off), huge pages are not tried however dear 4 KiB pages are.
		t.Logf("4 KiB pages took %v, but huge pages were not tried: MADV_HUGEPAGE refused", small)
	}
	want := int32(2)
	if huge > 0 && huge < small {
		want = 1
	}
	if got := hugeAdvice.Load(); got != want {
		t.Errorf("after a probe of huge %v against 4 KiB %v, advice = %d, want %d", huge, small, got, want)
	}
	h2, s2, _ := ProbeHugePages()
	if h2 != huge || s2 != small {
		t.Errorf("a second probe measured again: %v %v, want the first's %v %v", h2, s2, huge, small)
	}
}
