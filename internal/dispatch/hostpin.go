package dispatch

import (
	"fmt"
	"slices"
	"strings"
)

// HostLabelPrefix starts the platform label an agent reports for the
// machine it runs on (kici:host:<hostname>, protocol.PlatformLabels).
const HostLabelPrefix = "kici:host:"

// reasonHostTokenFmt is the pending reason of a job pinned to a host when
// the only agents with its labels claim the host label on a token that
// was not minted for that host.
const reasonHostTokenFmt = "waiting for an agent whose token was minted for %s (kici-admin agent register --labels %s on that host)"

// UnvouchedHost returns the first kici:host:* label of runsOn that an
// agent's token label scope (tokenLabels; nil for an unscoped token) does
// not list, "" when there is none. An agent reports its own kici:host:*
// label and a token's label scope does not restrict platform labels, so
// any agent can claim a host; only the token's scope shows that the
// operator (kici-admin agent register --labels kici:host:X) or the
// bare-metal scaler (which runs on that host) minted it for the host.
// Routing sends a job pinning a host only to an agent whose token vouches
// for it, and the job data resolver withholds its secrets anywhere else.
func UnvouchedHost(runsOn, tokenLabels []string) string {
	for _, l := range runsOn {
		if strings.HasPrefix(l, HostLabelPrefix) && !slices.Contains(tokenLabels, l) {
			return l
		}
	}
	return ""
}

// hostTokenReason is the pending reason for a job whose host label only
// unvouched agents claim.
func hostTokenReason(host string) string {
	return fmt.Sprintf(reasonHostTokenFmt, host, host)
}
