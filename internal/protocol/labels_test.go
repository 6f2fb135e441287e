package protocol

import (
	"slices"
	"testing"
)

func TestAutoLabels(t *testing.T) {
	cases := []struct {
		goos, goarch string
		want         []string
	}{
		{"linux", "amd64", []string{"kici:os:linux", "kici:arch:amd64", "kici:arch:x64", "kici:host:h1"}},
		{"darwin", "arm64", []string{"kici:os:darwin", "kici:os:macos", "kici:arch:arm64", "kici:arch:aarch64", "kici:host:h1"}},
		{"freebsd", "riscv64", []string{"kici:os:freebsd", "kici:arch:riscv64", "kici:host:h1"}},
	}
	for _, c := range cases {
		if got := AutoLabels(c.goos, c.goarch, "h1"); !slices.Equal(got, c.want) {
			t.Errorf("AutoLabels(%s, %s) = %v, want %v", c.goos, c.goarch, got, c.want)
		}
	}
}
