// Command kici-step-supervisor runs one step's shell for kici-agent and
// makes sure nothing the step started outlives it or the agent (package
// internal/agent/supervisor). kici-agent starts it, from beside its own
// binary, once per step; it is not meant to be run by hand.
package main

import (
	"os"

	"kici.dev/kici/internal/agent/supervisor"
)

func main() {
	os.Exit(supervisor.Main(os.Args[1:]))
}
