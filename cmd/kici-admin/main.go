// Command kici-admin administers a kici orchestrator over its admin HTTP API:
// sources, runs, jobs and logs. See `kici-admin --help`. It links no server
// package: direct-database mode (--database-url) runs in
// `kici-orchestrator admin` (delegate.go).
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
	code := cli.Run(ctx, os.Args[1:], cli.IO{DelegateDirect: func() error { return delegateDirect(os.Args[1:]) }})
	stop()
	os.Exit(code)
}
