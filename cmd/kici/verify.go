package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"kici.dev/kici/internal/provenance"
)

// maxFetch caps a bundle or JWKS read (file or URL).
const maxFetch = 25 << 20

// newVerifyCmd is `kici verify-attestation`: the verification of a
// provenance bundle, with the same code as the orchestrator's endpoint, against
// a JWKS read from a file (fully offline) or a URL.
func newVerifyCmd(stdout io.Writer) *cobra.Command {
	var issuer, jwks, digest, audience string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "verify-attestation <bundle.json> --issuer <url>",
		Short: "Verify a signed build provenance bundle",
		Long: `Verify a kici provenance bundle (from "kici-admin attestations get") exactly as the
orchestrator's POST /v1/verify-attestation does: the token issuer is pinned to
--issuer, the algorithm to ES256, the DSSE keyid must be the key's RFC 7638
thumbprint, the build context of the statement must match the token, and the
signing key must be in the key set.

The key set is --jwks: a file (fully offline) or an http(s) URL; by default
<issuer>/.well-known/jwks.json. A key revoked on the orchestrator is absent
from its JWKS, so bundles it signed fail here with token_key_unknown (the
orchestrator's own endpoint reports token_key_revoked).

Exit status: 0 verified, 1 not verified, 2 the bundle or key set could not be read.`,
		Example: `  kici verify-attestation bundle.json --issuer https://ci.example.com
  kici verify-attestation bundle.json --issuer https://ci.example.com --jwks jwks.json \
      --digest sha256:$(sha256sum dist/app.tar.gz | cut -d' ' -f1)`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if issuer == "" {
				return &exitError{code: 2, msg: "Error: --issuer is required (the issuer you trust, e.g. https://ci.example.com)"}
			}
			bundle, err := readSource(args[0])
			if err != nil {
				return &exitError{code: 2, msg: "Error: reading bundle: " + err.Error()}
			}
			if jwks == "" {
				jwks = strings.TrimRight(issuer, "/") + "/.well-known/jwks.json"
			}
			set, err := readSource(jwks)
			if err != nil {
				return &exitError{code: 2, msg: "Error: reading JWKS: " + err.Error()}
			}
			ks, err := provenance.ParseJWKS(set)
			if err != nil {
				return &exitError{code: 2, msg: "Error: " + err.Error()}
			}
			var d *provenance.Digest
			if digest != "" {
				hex, err := provenance.ParseDigest(digest)
				if err != nil {
					return &exitError{code: 2, msg: "Error: --digest: " + err.Error()}
				}
				d = &provenance.Digest{Alg: "sha256", Hex: hex}
			}
			v := provenance.Verify(bundle, provenance.VerifyOptions{Issuer: issuer, Audience: audience, Digest: d, Keys: ks})
			if asJSON {
				enc := json.NewEncoder(stdout)
				enc.SetIndent("", "  ")
				_ = enc.Encode(v)
			} else {
				printVerdict(stdout, v)
			}
			if !v.Verified {
				return &exitError{code: 1}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&issuer, "issuer", "", "trusted issuer URL (required; the token's own iss is never trusted)")
	f.StringVar(&jwks, "jwks", "", "JWKS file or http(s) URL (default <issuer>/.well-known/jwks.json)")
	f.StringVar(&digest, "digest", "", "require this subject digest, sha256:<64 hex>")
	f.StringVar(&audience, "audience", provenance.DefaultAudience, "expected token audience")
	f.BoolVar(&asJSON, "json", false, "print the verdict as JSON (the endpoint's shape)")
	return cmd
}

// readSource reads a local file, or GETs an http(s) URL (30 s, 25 MiB cap).
func readSource(src string) ([]byte, error) {
	if strings.HasPrefix(src, "https://") || strings.HasPrefix(src, "http://") {
		c := &http.Client{Timeout: 30 * time.Second}
		resp, err := c.Get(src)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("GET %s: HTTP %d", src, resp.StatusCode)
		}
		return io.ReadAll(io.LimitReader(resp.Body, maxFetch))
	}
	f, err := os.Open(src)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, maxFetch))
}

func printVerdict(w io.Writer, v *provenance.Verdict) {
	if v.Verified {
		fmt.Fprintln(w, "verified: yes")
	} else {
		fmt.Fprintln(w, "verified: NO")
	}
	c := v.Checks
	fmt.Fprintf(w, "checks:   schema=%s jwt=%s dsse=%s buildContext=%s digest=%s\n", c.Schema, c.JWT, c.DSSE, c.BuildContext, c.Digest)
	if v.Statement != nil && v.Claims != nil {
		for _, s := range v.Statement.Subject {
			fmt.Fprintf(w, "subject:  %s sha256:%s\n", s.Name, s.Digest["sha256"])
		}
		fmt.Fprintf(w, "built by: %s (%s@%s, %s)\n", v.Statement.Predicate.RunDetails.Builder.ID, v.Claims.Repository, v.Claims.SHA, v.Claims.Ref)
		fmt.Fprintf(w, "run:      %s job %s\n", v.Claims.RunID, v.Claims.JobID)
	}
	for _, f := range v.Failures {
		fmt.Fprintf(w, "failure:  %s (%s): %s\n", f.Code, f.Reason, f.Message)
	}
}
