package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"kici.dev/kici/internal/agent/runner"
)

// newAttestCmd is `kici-agent attest <path>...`, run inside a workflow step:
// it asks the agent running the step (through KICI_ATTEST_SOCKET with
// KICI_ATTEST_TOKEN) to have the orchestrator sign provenance for files of
// the checkout. The agent hashes the files itself and sends only names and
// SHA-256 digests.
func newAttestCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "attest <path>...",
		Short: "Inside a workflow step: sign build provenance for files the step produced",
		Long: "attest asks the agent running the current step to attest the given files (inside\n" +
			"the checkout): the orchestrator signs a SLSA v1 provenance statement for each and\n" +
			"stores the bundle. It only works inside a step (KICI_ATTEST_SOCKET and\n" +
			"KICI_ATTEST_TOKEN are set by the agent for the running job).",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			sock, tok := os.Getenv(runner.EnvAttestSocket), os.Getenv(runner.EnvAttestToken)
			if sock == "" || tok == "" {
				return errors.New("not inside a kici step with attestation available (KICI_ATTEST_SOCKET is not set)")
			}
			var paths []string
			for _, a := range args {
				abs, err := filepath.Abs(a)
				if err != nil {
					return err
				}
				paths = append(paths, abs)
			}
			c, err := net.DialTimeout("unix", sock, 5*time.Second)
			if err != nil {
				return fmt.Errorf("connect to the agent: %w", err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(runner.AttestTimeout + 15*time.Second))
			b, _ := json.Marshal(runner.AttestRequest{Token: tok, Paths: paths})
			if _, err := c.Write(append(b, '\n')); err != nil {
				return err
			}
			var resp runner.AttestResponse
			if err := json.NewDecoder(bufio.NewReader(c)).Decode(&resp); err != nil {
				return fmt.Errorf("reading the agent's answer: %w", err)
			}
			if !resp.OK {
				return fmt.Errorf("attestation refused: %s", resp.Error)
			}
			for _, r := range resp.Attestations {
				fmt.Fprintf(cmd.OutOrStdout(), "attested %s %s (attestation %s)\n", r.SubjectName, r.SubjectDigest, r.ID)
			}
			return nil
		},
	}
}
