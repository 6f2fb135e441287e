// Command kici-bench is `make bench`: it starts the real kici binaries and
// prints the performance figures of docs/performance.md as a table beside
// their targets (package internal/bench).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"

	"kici.dev/kici/internal/bench"
)

func main() {
	bin := flag.String("bin", "bin", "directory holding kici-orchestrator, kici-agent, kici-admin and kici")
	quick := flag.Bool("quick", false, "small scenarios: a smoke run of the harness, not figures to compare")
	pg := flag.Bool("postgres", true, "also measure on a throwaway PostgreSQL when its server binaries are installed")
	ingestOnly := flag.Bool("ingest-only", false, "measure only trigger → step, webhook accept and deliveries → runs")
	logsOnly := flag.Bool("logs-only", false, "measure only the log pipeline (one step printing a million lines), without the curves")
	memoryOnly := flag.Bool("memory-only", false, "measure only the orchestrator's memory: idle, with 1,000 protocol clients, 30 s after they left (about 2 minutes), without the curves")
	curves := flag.Bool("curves", true, "also measure the cost curves: 1,000 to 10,000 agents, 2,000 to 100,000 queued jobs, 1 and 3 nodes on PostgreSQL (a few minutes)")
	keep := flag.Bool("keep", false, "keep the data directories (orchestrator and agent logs, databases) and print where they are")
	flag.Parse()
	if abs, err := filepath.Abs(*bin); err == nil {
		*bin = abs
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	usePG := *pg
	if usePG {
		if _, err := exec.LookPath("pg_config"); err != nil {
			if _, err := os.Stat("/usr/lib/postgresql"); err != nil {
				fmt.Println("# PostgreSQL server binaries not found: the PostgreSQL column is not measured")
				usePG = false
			}
		}
	}
	if err := bench.Run(ctx, bench.Config{Bin: *bin, Quick: *quick, Postgres: usePG, IngestOnly: *ingestOnly, LogsOnly: *logsOnly, MemoryOnly: *memoryOnly, Curves: *curves, Keep: *keep, Out: os.Stdout}); err != nil {
		fmt.Fprintln(os.Stderr, "kici-bench:", err)
		os.Exit(1)
	}
}
