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

// LabelWarmPod marks a warm-pool agent of a kubernetes scaler (set by the
// scaler in KICI_LABELS and in the agent token's label scope). Its pod was
// made before any job, so it runs the label set's image alone: a job with
// `container:` or `services:` needs a pod made for it, so the dispatcher
// excludes this label for such jobs, which then get a pod of their own. It
// is an ordinary label, since agents refuse to declare the reserved kici:
// prefix.
const LabelWarmPod = "kici-warm-pod"
