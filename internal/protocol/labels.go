package protocol

// AutoLabels returns the platform labels every kici-agent adds to its
// registration, and that a scaler can promise for the agents it spawns:
// kici:os:<GOOS> (darwin also kici:os:macos), kici:arch:<GOARCH> (amd64 also
// kici:arch:x64, arm64 also kici:arch:aarch64) and kici:host:<hostname>.
// Source: KiCI packages/engine/src/labels.ts (auto labels) with Go's
// GOOS/GOARCH names as the primary spelling.
func AutoLabels(goos, goarch, hostname string) []string {
	l := []string{"kici:os:" + goos}
	if goos == "darwin" {
		l = append(l, "kici:os:macos")
	}
	l = append(l, "kici:arch:"+goarch)
	switch goarch {
	case "amd64":
		l = append(l, "kici:arch:x64")
	case "arm64":
		l = append(l, "kici:arch:aarch64")
	}
	return append(l, "kici:host:"+hostname)
}
