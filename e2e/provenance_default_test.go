package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// artifactAttestWorkflow is the first artifacts example of
// docs/caches-and-artifacts.md, with `make` spelled out: the build job
// uploads bin/ with `attest: true`, the test job downloads and runs it.
const artifactAttestWorkflow = `name: ci
on:
  push:
    branches: [main]
jobs:
  build:
    artifacts:
      - name: bin
        paths: ["bin/**", "!bin/*.tmp"]
        when: on-success
        attest: true
    run: |
      mkdir -p bin
      printf '#!/bin/sh\necho kici 1.0\n' > bin/kici
      chmod +x bin/kici
      echo scratch > bin/build.tmp
  test:
    needs: [build]
    download: [bin]
    run: ./bin/kici --version
`

// The embedded default (no configuration at all) signs provenance under its
// own URL: the documented `attest: true` example stores its artifact with an
// attestation that the verify endpoint and `kici verify-attestation` accept
// against the orchestrator's own issuer and JWKS.
func TestProvenanceEmbeddedDefaultAttestsArtifact(t *testing.T) {
	repo := repoWithWorkflow(t, artifactAttestWorkflow)
	o := startOrchestrator(t)

	var disc map[string]any
	o.get(t, "/.well-known/openid-configuration", &disc)
	if disc["issuer"] != o.url || disc["jwks_uri"] != o.url+"/.well-known/jwks.json" {
		t.Fatalf("discovery of the embedded default: %v (own URL %s)", disc, o.url)
	}
	if fi, err := os.Stat(filepath.Join(o.dataDir, "secret.key")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("master key sealing the signing key: %v %v", fi, err)
	}

	src := o.admin(t, "source", "add", "local", "--org", "acme", "--path", repo, "--name", "app", "--quiet")
	r := o.triggerAndWait(t, src)
	if r.Status != "success" {
		jobs := o.jobsOf(t, r.RunID)
		t.Fatalf("run %+v; build setup log:\n%s", r, o.logText(t, r.RunID, jobs["build"].JobID, -1))
	}
	if list := o.admin(t, "runs", "artifacts", r.RunID); !strings.Contains(list, "bin") {
		t.Fatalf("artifact bin not stored:\n%s", list)
	}
	atts := o.attestations(t, r.RunID)
	if len(atts) != 1 || atts[0].SubjectName != "artifact:bin" || !strings.HasPrefix(atts[0].SubjectDigest, "sha256:") {
		t.Fatalf("attestations: %+v", atts)
	}
	bundle := []byte(o.admin(t, "attestations", "get", atts[0].ID))
	if v := o.verifyOnline(t, bundle, atts[0].SubjectDigest); !v.Verified || v.Claims["iss"] != o.url {
		t.Fatalf("endpoint verdict: %+v", v)
	}
	if code, out := kiciVerify(t, bundle, "--issuer", o.url, "--jwks", o.url+"/.well-known/jwks.json", "--digest", atts[0].SubjectDigest); code != 0 || !strings.Contains(out, "verified: yes") {
		t.Fatalf("kici verify-attestation against the embedded issuer: exit %d\n%s", code, out)
	}
	if err := dsseCheck(t, bundle); err != nil {
		t.Fatal(err)
	}
	// The stored archive is the attested subject: kici-admin downloads it
	// and has the orchestrator verify the bundle against the file.
	archive := filepath.Join(t.TempDir(), "bin.tar.zst")
	o.admin(t, "runs", "artifacts", "download", r.RunID, "bin", "--archive", archive)
	data, err := os.ReadFile(archive)
	if err != nil || "sha256:"+sha256Hex(data) != atts[0].SubjectDigest {
		t.Fatalf("downloaded archive %v is not the attested subject %s", err, atts[0].SubjectDigest)
	}
	if out := o.admin(t, "attestations", "verify", atts[0].ID, "--file", archive); !strings.Contains(out, "verified: yes") || !strings.Contains(out, "issuer:  "+o.url) {
		t.Fatalf("kici-admin attestations verify:\n%s", out)
	}
}
