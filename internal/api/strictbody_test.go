package api

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// TestRotateRoutesRefuseUnknownFields: POST /signing-keys/rotate and
// POST /rotate-key take no parameters; a body with any field is a 400 and
// nothing rotates. No body, a blank one or {} rotates.
func TestRotateRoutesRefuseUnknownFields(t *testing.T) {
	e, svc := newProvEnv(t, testIssuer)
	ctx := context.Background()
	if _, _, err := svc.Keys().Active(ctx); err != nil {
		t.Fatal(err)
	}
	keyCount := func() int {
		code, m, _ := e.do("GET", "/api/v1/admin/signing-keys", e.owner, "")
		if code != 200 {
			t.Fatalf("list keys: %d %v", code, m)
		}
		return len(m["keys"].([]any))
	}
	before := keyCount()
	for _, body := range []string{`{"kid":"mine"}`, `{"force":true}`, `[]`, `{} {}`, `"x"`} {
		code, m, _ := e.do("POST", "/api/v1/admin/signing-keys/rotate", e.owner, body)
		if code != 400 {
			t.Fatalf("signing-keys/rotate %s: %d %v, want 400", body, code, m)
		}
	}
	if n := keyCount(); n != before {
		t.Fatalf("refused rotations changed the keys: %d, want %d", n, before)
	}
	for i, body := range []string{"", " \n", "{}"} {
		if code, m, _ := e.do("POST", "/api/v1/admin/signing-keys/rotate", e.owner, body); code != 201 {
			t.Fatalf("signing-keys/rotate %q: %d %v", body, code, m)
		}
		if n := keyCount(); n != before+i+1 {
			t.Fatalf("after rotation %d: %d keys", i+1, n)
		}
	}

	s := newSecEnv(t)
	if err := s.svc.Put(ctx, "acme", "release", "k", "v", nil); err != nil {
		t.Fatal(err)
	}
	code, m, _ := s.do("POST", "/api/v1/admin/rotate-key", s.owner, `{"dryRun":true}`)
	if code != 400 || !strings.Contains(fmt.Sprint(m["error"]), "dryRun") {
		t.Fatalf("rotate-key with an unknown field: %d %v, want 400 naming it", code, m)
	}
	_, m, _ = s.do("GET", "/api/v1/admin/access-log?action=key.rotate", s.owner, "")
	if n := len(m["entries"].([]any)); n != 0 {
		t.Fatalf("a refused rotate-key rotated: %v", m)
	}
	if code, m, _ := s.do("POST", "/api/v1/admin/rotate-key", s.owner, "{}"); code != 200 {
		t.Fatalf("rotate-key {}: %d %v", code, m)
	}
}

// TestWriteRoutesRefuseUnknownFields walks every write route with an owner
// token and a body holding only an unknown field: none may answer 2xx.
func TestWriteRoutesRefuseUnknownFields(t *testing.T) {
	e := newSecEnv(t)
	for _, r := range Routes {
		f := strings.Fields(r)
		method, path := f[0], f[1]
		if method == "GET" || f[2] == "-" {
			continue
		}
		for _, p := range []string{"{id}", "{runId}", "{jobId}", "{secretId}", "{kid}", "{orgId}", "{scope}", "{key}", "{name}", "{deliveryId}", "{i}"} {
			path = strings.ReplaceAll(path, p, "x")
		}
		if strings.Contains(path, "/contexts/") || strings.HasSuffix(path, "/contexts") || strings.Contains(path, "trust-policy") || strings.Contains(path, "held-runs") {
			path += "?orgId=acme"
		}
		code, m, _ := e.do(method, path, e.owner, `{"kiciUnknownField":1}`)
		if code < 300 {
			t.Errorf("%s %s with an unknown field: %d %v", method, path, code, m)
		}
	}
}
