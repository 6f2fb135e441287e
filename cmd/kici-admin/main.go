// Command kici-admin administers a kici orchestrator over its admin HTTP API:
// sources, runs, jobs and logs. See `kici-admin --help`.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"kici.dev/kici/internal/cli"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	cli.Version = version
	code := cli.Run(ctx, os.Args[1:], cli.IO{OpenDatabase: openDatabase})
	stop()
	os.Exit(code)
}
