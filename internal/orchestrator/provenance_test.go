package orchestrator

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"kici.dev/kici/internal/protocol"
	"kici.dev/kici/internal/provenance"
	"kici.dev/kici/internal/provider"
	"kici.dev/kici/internal/runs/status"
	"kici.dev/kici/internal/secrets/masterkey"
	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/store/sqlite"
)

func TestAttesterAcceptsOnlySHA256Subjects(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := sqlite.Open(ctx, filepath.Join(dir, "kici.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	mk, err := masterkey.Load(dir, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	if err := st.CreateRun(ctx, &store.Run{ID: "r", WorkflowName: "w", Status: status.RunRunning, Provider: provider.Local, RepoIdentifier: "a/b",
		Ref: "refs/heads/main", SHA: strings.Repeat("a", 40), CreatedAt: now}, []*store.Job{{ID: "j", JobName: "b", BaseJobName: "b", Status: status.JobRunning}}); err != nil {
		t.Fatal(err)
	}
	a := attester{provenance.NewService(st, provenance.NewKeys(st, mk), provenance.Config{Issuer: "https://ci.example.test"})}
	good := strings.Repeat("0", 64)
	for _, bad := range [][]protocol.AttestSubject{
		{{Name: "x", Digest: map[string]string{"sha512": good + good}}},
		{{Name: "x", Digest: map[string]string{"sha256": good, "sha1": strings.Repeat("0", 40)}}},
		{{Name: "x", Digest: nil}},
	} {
		if _, err := a.Attest(ctx, "r", "j", bad); err == nil {
			t.Errorf("subjects %v accepted", bad)
		}
	}
	refs, err := a.Attest(ctx, "r", "j", []protocol.AttestSubject{{Name: "x", Digest: map[string]string{"sha256": good}}})
	if err != nil || len(refs) != 1 || refs[0].SubjectDigest != "sha256:"+good || refs[0].ID == "" {
		t.Fatalf("refs %+v, %v", refs, err)
	}
	if list, _ := st.ListAttestations(ctx, "r"); len(list) != 1 {
		t.Fatalf("%d stored bundles, want 1", len(list))
	}
}
