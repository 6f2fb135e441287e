package agent

import (
	"os"
	"strconv"
	"strings"
)

// stepUserCaps are the capabilities (capabilities(7) bit numbers) a root
// agent needs to run steps as another uid: hand the job's files to it
// (CAP_CHOWN, CAP_FOWNER), read and remove what the steps wrote
// (CAP_DAC_OVERRIDE), start steps as it (CAP_SETUID, CAP_SETGID) and stop
// them (CAP_KILL). Docker's and containerd's default set holds all six; a
// pod whose securityContext drops ALL holds none, although it is uid 0.
var stepUserCaps = []struct {
	bit  uint
	name string
}{
	{0, "CAP_CHOWN"}, {1, "CAP_DAC_OVERRIDE"}, {3, "CAP_FOWNER"},
	{5, "CAP_KILL"}, {6, "CAP_SETGID"}, {7, "CAP_SETUID"},
}

// missingStepUserCaps names the stepUserCaps this process's effective set
// lacks (from CapEff in /proc/self/status). A variable so tests can stand
// in for an agent without privileges.
var missingStepUserCaps = func() []string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return nil // not Linux' proc: nothing to tell; setuid would fail loudly
	}
	return missingCaps(string(b))
}

// missingCaps reads the CapEff line of a /proc/<pid>/status text (64 bits
// in hexadecimal) and names the stepUserCaps it lacks; without that line
// it names none.
func missingCaps(status string) []string {
	for _, line := range strings.Split(status, "\n") {
		v, ok := strings.CutPrefix(line, "CapEff:")
		if !ok {
			continue
		}
		eff, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		if err != nil {
			return nil
		}
		var out []string
		for _, c := range stepUserCaps {
			if eff&(1<<c.bit) == 0 {
				out = append(out, c.name)
			}
		}
		return out
	}
	return nil
}
