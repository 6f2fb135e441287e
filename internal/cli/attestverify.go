package cli

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"

	"github.com/spf13/cobra"

	"kici.dev/kici/internal/api/apitypes"
)

// onlineVerdict is the part of POST /v1/verify-attestation's verdict the
// command prints (docs/provenance.md); --json prints all of it.
type onlineVerdict struct {
	Verified bool           `json:"verified"`
	Claims   map[string]any `json:"claims"`
	Failures []struct {
		Code    string `json:"code"`
		Reason  string `json:"reason"`
		Message string `json:"message"`
	} `json:"failures"`
}

// attestationsVerifyCommand is `kici-admin attestations verify`: the
// stored bundle checked by the orchestrator's verify endpoint, against the
// orchestrator's own issuer and live keys (revocations included).
func (a *app) attestationsVerifyCommand() *cobra.Command {
	var digest, file string
	cmd := &cobra.Command{
		Use:   "verify <attestation-id>",
		Short: "Verify an attestation online, against the orchestrator's own issuer and keys",
		Long: `Fetch an attestation's bundle and have the orchestrator verify it
(POST /v1/verify-attestation): issuer, ES256 token, DSSE signature, build
context and, with --digest or --file, that the bundle's subject is that
digest. This trusts the orchestrator you talk to; to verify without it, use
kici verify-attestation with a copy of its JWKS.

Exit status 0 = verified, 1 = not verified (the failures are printed).`,
		Example: `  kici-admin attestations verify <attestation-id>
  kici-admin attestations verify <attestation-id> --file bin.tar.zst
  kici-admin attestations verify <attestation-id> --digest sha256:4f1c… --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if digest != "" && file != "" {
				return fmt.Errorf("give --digest or --file, not both")
			}
			if file != "" {
				f, err := os.Open(file)
				if err != nil {
					return err
				}
				h := sha256.New()
				_, err = io.Copy(h, f)
				f.Close()
				if err != nil {
					return err
				}
				digest = "sha256:" + hex.EncodeToString(h.Sum(nil))
			}
			var att apitypes.Attestation
			if _, err := a.call(cmd, http.MethodGet, apitypes.AdminPrefix+"/attestations/"+url.PathEscape(args[0]), nil, nil, &att); err != nil {
				return err
			}
			if len(att.Bundle) == 0 {
				return fmt.Errorf("attestation %s has no stored bundle", args[0])
			}
			req := map[string]any{"bundle": json.RawMessage(att.Bundle)}
			if digest != "" {
				req["digest"] = digest
			}
			var v onlineVerdict
			raw, err := a.call(cmd, http.MethodPost, "/v1/verify-attestation", nil, req, &v)
			if err != nil {
				return err
			}
			if a.json {
				printJSON(a.out(), raw)
			} else if v.Verified {
				fmt.Fprintf(a.out(), "verified: yes\n  subject: %s %s\n  issuer:  %v\n  run:     %v\n", att.SubjectName, att.SubjectDigest, v.Claims["iss"], v.Claims["kici_run_id"])
			} else {
				fmt.Fprintln(a.out(), "verified: no")
				for _, f := range v.Failures {
					fmt.Fprintf(a.out(), "  %s/%s: %s\n", f.Code, f.Reason, f.Message)
				}
			}
			if !v.Verified {
				return &ExitError{Code: 1}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&digest, "digest", "", "expected subject digest, sha256:<hex>")
	cmd.Flags().StringVar(&file, "file", "", "file whose SHA-256 must be the subject (e.g. a downloaded artifact archive)")
	return cmd
}
