package scaler

import (
	"os"
	"strings"
)

// ConfinementVars are the orchestrator's settings of how spawned bare-metal
// agents confine their steps (the agent reads them, internal/agent
// confine.go); they are passed on to each agent although other KICI_*
// variables are not.
var ConfinementVars = []string{"KICI_STEP_USER", "KICI_STEP_UID_RANGE", "KICI_STEP_SHARED_PATHS", "KICI_ALLOW_UNCONFINED_STEPS"}

// confinementVars returns the ConfinementVars entries of base (default
// os.Environ()).
func confinementVars(base []string) []string {
	if base == nil {
		base = os.Environ()
	}
	var out []string
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		for _, name := range ConfinementVars {
			if k == name {
				out = append(out, kv)
			}
		}
	}
	return out
}
