package runner

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"kici.dev/kici/internal/runs/status"

	"kici.dev/kici/internal/protocol"
	"kici.dev/kici/internal/testutil/wait"
)

type msgs struct {
	mu  sync.Mutex
	all []any
}

func (m *msgs) Send(msg any) {
	m.mu.Lock()
	m.all = append(m.all, msg)
	m.mu.Unlock()
}

type fakeAttest struct {
	mu    sync.Mutex
	calls [][]protocol.AttestSubject
	jobs  []string
}

func (f *fakeAttest) attest(_ context.Context, runID, jobID string, s []protocol.AttestSubject) ([]protocol.AttestationRef, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, s)
	f.jobs = append(f.jobs, runID+"/"+jobID)
	var out []protocol.AttestationRef
	for _, x := range s {
		out = append(out, protocol.AttestationRef{ID: "att-" + x.Name, SubjectName: x.Name, SubjectDigest: "sha256:" + x.Digest["sha256"]})
	}
	return out, nil
}

func dispatchOf(t *testing.T, steps string) *protocol.JobDispatch {
	t.Helper()
	return &protocol.JobDispatch{Type: protocol.TypeJobDispatch, RunID: "run-1", JobID: "job-1", JobName: "build",
		JobConfig: json.RawMessage(`{"name":"build","checkout":false,"steps":` + steps + `}`)}
}

func hexSum(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func TestAttestDeclaredFiles(t *testing.T) {
	fa := &fakeAttest{}
	out := &msgs{}
	r := New(Options{WorkRoot: t.TempDir(), HostEnv: os.Environ(), Attest: fa.attest}, out)
	outside := filepath.Join(t.TempDir(), "secret.txt")
	if err := os.WriteFile(outside, []byte("host file"), 0o600); err != nil {
		t.Fatal(err)
	}
	res := r.Run(context.Background(), dispatchOf(t, `[
		{"name":"build","run":"mkdir -p dist && echo hi > dist/a.txt","attest":["dist/a.txt"]},
		{"name":"escape","run":"ln -s `+outside+` dist/link","attest":["dist/link"]}]`))
	if res.Steps[0].Status != status.StepSuccess {
		t.Fatalf("build step: %+v", res.Steps[0])
	}
	if len(fa.calls) != 1 || fa.jobs[0] != "run-1/job-1" || fa.calls[0][0].Name != "dist/a.txt" || fa.calls[0][0].Digest["sha256"] != hexSum("hi\n") {
		t.Fatalf("attest calls %+v %v", fa.calls, fa.jobs)
	}
	if res.Steps[1].Status != status.StepFailed || !strings.Contains(res.Steps[1].Error, "only files inside the checkout") {
		t.Fatalf("symlink escaping the checkout: %+v", res.Steps[1])
	}
}

func TestAttestDeclaredWithoutChannelFailsStep(t *testing.T) {
	r := New(Options{WorkRoot: t.TempDir(), HostEnv: os.Environ()}, &msgs{})
	res := r.Run(context.Background(), dispatchOf(t, `[{"run":"echo x > a","attest":["a"]}]`))
	if res.State != status.JobFailed || !strings.Contains(res.Steps[0].Error, "attestation is not available") {
		t.Fatalf("result %+v", res)
	}
}

// ask sends one request on the job's attestation socket.
func ask(t *testing.T, sock string, req AttestRequest) AttestResponse {
	t.Helper()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	b, _ := json.Marshal(req)
	if _, err := c.Write(append(b, '\n')); err != nil {
		t.Fatal(err)
	}
	var resp AttestResponse
	if err := json.NewDecoder(c).Decode(&resp); err != nil {
		t.Fatal(err)
	}
	return resp
}

func TestAttestSocketIsBoundToTheRunningJob(t *testing.T) {
	fa := &fakeAttest{}
	r := New(Options{WorkRoot: t.TempDir(), HostEnv: os.Environ(), Attest: fa.attest}, &msgs{})
	dir := t.TempDir()
	info, done := filepath.Join(dir, "info"), filepath.Join(dir, "done")
	resc := make(chan *Result, 1)
	go func() {
		resc <- r.Run(context.Background(), dispatchOf(t, `[{"run":"echo built > out.bin; echo \"$KICI_ATTEST_SOCKET $KICI_ATTEST_TOKEN $PWD\" > `+info+
			`; while [ ! -f `+done+` ]; do sleep 0.05; done"}]`))
	}()
	var fields []string
	wait.For(t, 10*time.Second, "the step to publish its attestation channel", func() bool {
		b, _ := os.ReadFile(info)
		fields = strings.Fields(string(b))
		return len(fields) == 3
	})
	sock, token, pwd := fields[0], fields[1], fields[2]
	if fi, err := os.Stat(filepath.Dir(sock)); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("socket directory: %v %v", fi, err)
	}
	if r := ask(t, sock, AttestRequest{Token: "wrong", Paths: []string{filepath.Join(pwd, "out.bin")}}); r.OK || r.Error != "invalid attestation token" {
		t.Fatalf("wrong token: %+v", r)
	}
	if r := ask(t, sock, AttestRequest{Token: token, Paths: []string{"/etc/hostname"}}); r.OK || !strings.Contains(r.Error, "inside the checkout") {
		t.Fatalf("file outside the checkout: %+v", r)
	}
	if len(fa.calls) != 0 {
		t.Fatalf("refused requests reached the orchestrator: %v", fa.calls)
	}
	resp := ask(t, sock, AttestRequest{Token: token, Paths: []string{filepath.Join(pwd, "out.bin")}})
	if !resp.OK || len(resp.Attestations) != 1 || resp.Attestations[0].SubjectDigest != "sha256:"+hexSum("built\n") {
		t.Fatalf("attest: %+v", resp)
	}
	if err := os.WriteFile(done, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if res := <-resc; res.State != status.JobSuccess {
		t.Fatalf("job %+v", res)
	}
	// The channel is gone with the job.
	if _, err := net.Dial("unix", sock); err == nil || errors.Is(err, os.ErrExist) {
		t.Fatal("attestation socket still accepts connections after the job")
	}
	if _, err := os.Stat(filepath.Dir(sock)); !os.IsNotExist(err) {
		t.Fatalf("socket directory not removed: %v", err)
	}
}
