package cli

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"

	"github.com/spf13/cobra"

	"kici.dev/kici/internal/api/apitypes"
)

// attestationsCommand is `kici-admin attestations list|get|verify`.
func (a *app) attestationsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "attestations",
		Short: "List, fetch and verify signed build provenance bundles",
		Example: `  kici-admin attestations list <run-id>
  kici-admin attestations verify <attestation-id>
  kici-admin attestations get <attestation-id> > bundle.json
  kici verify-attestation bundle.json --issuer https://ci.example.com`,
	}
	list := &cobra.Command{
		Use:   "list <run-id>",
		Short: "List a run's attestations, oldest first",
		Example: `  kici-admin attestations list <run-id>
  kici-admin attestations list <run-id> --quiet   # attestation ids only`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var resp struct {
				Attestations []apitypes.Attestation `json:"attestations"`
			}
			if done, err := a.callJSON(cmd, http.MethodGet, "/api/v1/admin/runs/"+url.PathEscape(args[0])+"/attestations", nil, nil, &resp); done || err != nil {
				return err
			}
			if a.quiet {
				for _, x := range resp.Attestations {
					fmt.Fprintln(a.out(), x.ID)
				}
				return nil
			}
			t := newTable(a.out(), "ID", "JOB", "SUBJECT", "DIGEST", "KID", "CREATED")
			for _, x := range resp.Attestations {
				t.row(x.ID, short(x.JobID, 12), x.SubjectName, short(x.SubjectDigest, 23), short(x.Kid, 12), fmtTime(&x.CreatedAt))
			}
			t.flush()
			return nil
		},
	}
	get := &cobra.Command{
		Use:   "get <attestation-id>",
		Short: "Print an attestation's bundle (the JSON `kici verify-attestation` reads)",
		Example: `  kici-admin attestations get <attestation-id> > bundle.json
  kici-admin attestations get <attestation-id> --json   # with id, run, job, subject`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var x apitypes.Attestation
			if done, err := a.callJSON(cmd, http.MethodGet, "/api/v1/admin/attestations/"+url.PathEscape(args[0]), nil, nil, &x); done || err != nil {
				return err
			}
			printJSON(a.out(), x.Bundle)
			return nil
		},
	}
	cmd.AddCommand(list, get, a.attestationsVerifyCommand())
	return cmd
}

// signingKeyCommand is `kici-admin signing-key list|rotate|revoke`.
func (a *app) signingKeyCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "signing-key",
		Short: "Manage the orchestrator's provenance signing keys (owner role)",
		Example: `  kici-admin signing-key list
  kici-admin signing-key rotate
  kici-admin signing-key revoke <kid> --reason "key exposed in backup"`,
	}
	show := func(raw []byte) {
		if a.json {
			printJSON(a.out(), raw)
			return
		}
		var k apitypes.SigningKey
		_ = json.Unmarshal(raw, &k)
		fmt.Fprintf(a.out(), "%s %s\n", k.Kid, k.Status)
	}
	list := &cobra.Command{
		Use:   "list",
		Short: "List signing keys, newest first (active, retiring, retired, revoked)",
		Example: `  kici-admin signing-key list
  kici-admin signing-key list --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var resp struct {
				Keys []apitypes.SigningKey `json:"keys"`
			}
			if done, err := a.callJSON(cmd, http.MethodGet, "/api/v1/admin/signing-keys", nil, nil, &resp); done || err != nil {
				return err
			}
			t := newTable(a.out(), "KID", "STATUS", "CREATED", "RETIRED", "REVOKED", "REASON")
			for _, k := range resp.Keys {
				t.row(k.Kid, string(k.Status), fmtTime(&k.CreatedAt), fmtTime(k.RetiredAt), fmtTime(k.RevokedAt), k.RevocationReason)
			}
			t.flush()
			return nil
		},
	}
	rotate := &cobra.Command{
		Use:     "rotate",
		Short:   "Create a new active key; the previous one keeps verifying old bundles (retiring)",
		Example: `  kici-admin signing-key rotate`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.api()
			if err != nil {
				return err
			}
			raw, err := c.Post(cmd.Context(), "/api/v1/admin/signing-keys/rotate", struct{}{}, nil)
			if err != nil {
				return err
			}
			show(raw)
			return nil
		},
	}
	var reason string
	revoke := &cobra.Command{
		Use:   "revoke <kid> --reason <text>",
		Short: "Revoke a key at once: it leaves the JWKS and every bundle it signed stops verifying",
		Example: `  kici-admin signing-key revoke <kid> --reason "private key exposed in a backup"
  # a key id may start with "-": end the flags with -- before it
  kici-admin signing-key revoke --reason "private key exposed in a backup" -- -Wq3...`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if reason == "" {
				return fmt.Errorf("--reason is required")
			}
			c, err := a.api()
			if err != nil {
				return err
			}
			raw, err := c.Post(cmd.Context(), "/api/v1/admin/signing-keys/"+url.PathEscape(args[0])+"/revoke", map[string]string{"reason": reason}, nil)
			if err != nil {
				return err
			}
			show(raw)
			return nil
		},
	}
	revoke.Flags().StringVar(&reason, "reason", "", "why the key is revoked (required, recorded with the key)")
	cmd.AddCommand(list, rotate, revoke)
	return cmd
}
