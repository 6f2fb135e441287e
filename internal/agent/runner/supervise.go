package runner

import (
	"os"

	"kici.dev/kici/internal/agent/supervisor"
	"kici.dev/kici/internal/agent/transfer"
)

// SupervisorArg is the first argument that makes kici-agent run as a step
// supervisor instead of an agent (supervisor.Arg). Options.Supervisor is
// [kici-step-supervisor] where that binary sits beside kici-agent, else
// [kici-agent, SupervisorArg]: same behaviour, at the agent's larger
// start-up cost per step.
const SupervisorArg = supervisor.Arg

// Supervise runs the step supervisor (or the container reaper, or a cache
// and artifact transfer as the job's user) when args (os.Args[1:]) start
// with SupervisorArg (ContainerReaperArg, transfer.ChildArg) and never
// returns then; otherwise it returns at once. A binary that sets
// Options.Supervisor to itself must call it first thing in main.
func Supervise(args []string) {
	if len(args) > 0 && args[0] == ContainerReaperArg {
		os.Exit(reap(args[1:])) // containerreaper.go
	}
	if len(args) > 0 && args[0] == transfer.ChildArg {
		os.Exit(transfer.ChildMain(args)) // jobfiles.go
	}
	if len(args) == 0 || args[0] != SupervisorArg {
		return
	}
	os.Exit(supervisor.Main(args))
}
