package cli

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"kici.dev/kici/internal/agent/transfer"
	"kici.dev/kici/internal/api/apitypes"
)

func (a *app) runsArtifactsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "artifacts <run-id>",
		Short: "List a run's artifacts (name, job, size, sha256, expiry)",
		Example: `  kici-admin runs artifacts <run-id>
  kici-admin runs artifacts download <run-id> bin --dir out/
  kici-admin runs artifacts download <run-id> bin --archive bin.tar.zst`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.api()
			if err != nil {
				return err
			}
			var resp struct {
				Artifacts []apitypes.ArtifactView `json:"artifacts"`
			}
			raw, err := c.Get(cmd.Context(), apitypes.AdminPrefix+"/runs/"+url.PathEscape(args[0])+"/artifacts", nil, &resp)
			if err != nil {
				return err
			}
			if a.json {
				_, err := a.out().Write(raw)
				return err
			}
			if len(resp.Artifacts) == 0 {
				fmt.Fprintln(a.out(), "no artifacts")
				return nil
			}
			t := newTable(a.out(), "NAME", "JOB", "SIZE", "SHA256", "EXPIRES")
			for _, v := range resp.Artifacts {
				t.row(v.Name, v.JobName, fmt.Sprint(v.SizeBytes), v.SHA256, fmtTime(&v.ExpiresAt))
			}
			t.flush()
			return nil
		},
	}
	cmd.AddCommand(a.runsArtifactsDownloadCommand())
	return cmd
}

func (a *app) runsArtifactsDownloadCommand() *cobra.Command {
	var dir, archive string
	cmd := &cobra.Command{
		Use:   "download <run-id> <name>",
		Short: "Download an artifact: extract its files into --dir (default .), or save the archive with --archive",
		Long: `Download an artifact and check its sha256 against the digest the orchestrator
recorded at upload. By default the files are extracted under --dir at the
paths they had in the job's workspace; on a digest mismatch the files just
written are removed again and the command fails. --archive saves the raw
zstd-compressed tar instead (removed again on a mismatch).`,
		Example: `  kici-admin runs artifacts download <run-id> bin --dir out/
  kici-admin runs artifacts download <run-id> bin --archive bin.tar.zst`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.api()
			if err != nil {
				return err
			}
			u := c.BaseURL + apitypes.AdminPrefix + "/runs/" + url.PathEscape(args[0]) + "/artifacts/" + url.PathEscape(args[1])
			req, err := http.NewRequestWithContext(cmd.Context(), http.MethodGet, u, nil)
			if err != nil {
				return err
			}
			if c.Token != "" {
				req.Header.Set("Authorization", "Bearer "+c.Token)
			}
			resp, err := c.HTTP.Do(req)
			if err != nil {
				return fmt.Errorf("request to %s failed: %w", c.BaseURL, err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
				return &HTTPError{Status: resp.StatusCode, Message: errorMessage(resp.StatusCode, b)}
			}
			want := resp.Header.Get("X-Kici-Sha256")
			h := sha256.New()
			body := io.TeeReader(resp.Body, h)
			var undo func()
			var summary string
			if archive != "" {
				f, err := os.OpenFile(archive, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
				if err != nil {
					return err
				}
				n, err := io.Copy(f, body)
				if cerr := f.Close(); err == nil {
					err = cerr
				}
				undo = func() { os.Remove(archive) }
				if err != nil {
					undo()
					return err
				}
				summary = fmt.Sprintf("saved %s (%d bytes)", archive, n)
			} else {
				abs, err := filepath.Abs(dir)
				if err != nil {
					return err
				}
				st, created, err := transfer.Unpack(body, []transfer.Root{{Dir: abs}})
				if err == nil {
					_, err = io.Copy(io.Discard, body)
				}
				undo = func() { transfer.Undo(created) }
				if err != nil {
					undo()
					return fmt.Errorf("artifact %s: %w", args[1], err)
				}
				summary = fmt.Sprintf("extracted %d files (%d bytes) into %s", st.Files, st.Bytes, abs)
			}
			if got := hex.EncodeToString(h.Sum(nil)); got != want {
				undo()
				return fmt.Errorf("artifact %s: downloaded content has sha256 %s, the orchestrator recorded %s; nothing kept", args[1], got, want)
			}
			fmt.Fprintf(a.out(), "%s: %s, sha256 %s verified\n", args[1], summary, want)
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", ".", "directory to extract the files into")
	cmd.Flags().StringVar(&archive, "archive", "", "save the zstd-compressed tar to this new file instead of extracting")
	return cmd
}
