//go:build linux

package startpages

import (
	"os"
	"testing"
)

func TestResidentOfThisProcess(t *testing.T) {
	r, err := ResidentOf(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// VmRSS is RssAnon + RssFile + RssShmem.
	if r.Anon <= 0 || r.File <= 0 || r.Total < r.Anon+r.File {
		t.Fatalf("resident %+v: want both parts above zero and the total at least their sum", r)
	}
	if _, err := ResidentOf(-1); err == nil {
		t.Fatal("no error for a process that does not exist")
	}
}
