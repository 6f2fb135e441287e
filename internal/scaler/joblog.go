package scaler

import "regexp"

// Host details in provisioning lines. A job's provisioning log and pending
// reason are read by anyone who can read the run — on a public repository,
// the author of a fork pull request — so they must not map the
// orchestrator's machine: its file system (agent binary, data and log
// directories, sockets), its addresses or its process ids. The backends
// phrase their job lines without them and log the details on the
// orchestrator's own log; withholdHostDetails is the net under both, for
// text the scaler does not write itself (spawn and exit errors).
var (
	// An absolute path at the start of the text or after a separator (so
	// an image reference such as registry.example.com/team/agent:1 is left
	// alone) and not a URL's "//", up to a space, quote, parenthesis,
	// comma or colon (an error's "path: reason").
	hostPathRE = regexp.MustCompile(`(^|[\s"'(=,:\[])/[^/\s"'(),:\]][^\s"'(),:\]]*`)
	// An IPv4 address, optionally with a port, or a bracketed IPv6 one.
	hostAddrRE = regexp.MustCompile(`\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b|\[[0-9A-Fa-f:.%]+\](?::\d+)?`)
)

// withholdHostDetails returns text with every absolute path replaced by
// "<host path>" and every IP address by "<host address>", and whether
// anything was replaced.
func withholdHostDetails(text string) (string, bool) {
	out := hostPathRE.ReplaceAllString(text, "${1}<host path>")
	out = hostAddrRE.ReplaceAllString(out, "<host address>")
	return out, out != text
}
