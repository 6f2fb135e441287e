package api

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"kici.dev/kici/internal/config"
	"kici.dev/kici/internal/store"
)

const tpBase = "/api/v1/admin/trust-policy"

func TestTrustPolicyDefaultsPatchAndAudit(t *testing.T) {
	e := newModeEnv(t, "", false)
	if code, m, _ := e.do("GET", tpBase, e.owner, ""); code != 400 || m["error"] != "customerId required" {
		t.Fatalf("no customerId: %d %v", code, m)
	}
	// No row: kici's defaults (hold, 72 h), marked as such; the auditor reads it.
	code, m, _ := e.do("GET", tpBase+"?customerId=acme", e.auditor, "")
	p, _ := m["policy"].(map[string]any)
	if code != 200 || p["forkPolicy"] != "hold" || p["approvalExpirySeconds"].(float64) != 259200 || p["approvalExpiryHours"].(float64) != 72 ||
		p["effectiveDefault"] != true || p["platformManaged"] != false || p["source"] != nil || p["updatedAt"] != nil || p["customerId"] != "acme" {
		t.Fatalf("defaults: %d %v", code, m)
	}

	for body, want := range map[string]string{
		`{"customerId":"acme"}`:                                  "No trust policy fields",
		`{"forkPolicy":"allow"}`:                                 "customerId required",
		`{"customerId":"acme","forkPolicy":"open"}`:              `forkPolicy "open" must be ignore, hold or allow`,
		`{"customerId":"acme","approvalExpiryHours":0}`:          "approvalExpiryHours must be an integer from 1",
		`{"customerId":"acme","approvalExpirySeconds":59}`:       "approvalExpirySeconds must be an integer from 60",
		`{"customerId":"acme","approvalExpiryHours":1.5}`:        "Invalid JSON body",
		`{"customerId":"acme","forkPolicy":"hold","extra":true}`: `unknown field "extra"`,
	} {
		if code, m, _ := e.do("PATCH", tpBase, e.owner, body); code != 400 || !strings.Contains(fmt.Sprint(m["error"]), want) {
			t.Errorf("%s: %d %v, want 400 %q", body, code, m, want)
		}
	}
	if code, m, _ := e.do("PATCH", tpBase, e.auditor, `{"customerId":"acme","forkPolicy":"allow"}`); code != 403 {
		t.Fatalf("auditor patch: %d %v", code, m)
	}
	if _, err := e.st.GetTrustPolicy(context.Background(), "acme"); err == nil {
		t.Fatal("refused patches stored a policy")
	}

	// Only the fields given change; seconds win over hours; hours round up.
	code, m, _ = e.do("PATCH", tpBase, e.owner, `{"customerId":"acme","forkPolicy":"ignore"}`)
	p, _ = m["policy"].(map[string]any)
	if code != 200 || p["forkPolicy"] != "ignore" || p["approvalExpirySeconds"].(float64) != 259200 || p["source"] != "local" || p["effectiveDefault"] != false {
		t.Fatalf("patch fork policy: %d %v", code, m)
	}
	_, m, _ = e.do("PATCH", tpBase, e.owner, `{"customerId":"acme","approvalExpiryHours":2,"approvalExpirySeconds":5400}`)
	if p = m["policy"].(map[string]any); p["approvalExpirySeconds"].(float64) != 5400 || p["approvalExpiryHours"].(float64) != 2 || p["forkPolicy"] != "ignore" {
		t.Fatalf("seconds win, hours round up: %v", p)
	}
	_, m, _ = e.do("PATCH", tpBase, e.owner, `{"customerId":"acme","approvalExpiryHours":3}`)
	if p = m["policy"].(map[string]any); p["approvalExpirySeconds"].(float64) != 10800 {
		t.Fatalf("hours: %v", p)
	}
	stored, err := e.st.GetTrustPolicy(context.Background(), "acme")
	if err != nil || stored.ForkPolicy != "ignore" || stored.ApprovalExpirySeconds != 10800 {
		t.Fatalf("stored: %+v %v", stored, err)
	}
	_, m, _ = e.do("GET", tpBase+"?customerId=acme", e.owner, "")
	if p = m["policy"].(map[string]any); p["effectiveDefault"] != false || p["updatedAt"] == nil || p["source"] != "local" {
		t.Fatalf("get after patch: %v", p)
	}
	// Each accepted patch is one trust_policy.updated row with the patch
	// and the merged policy.
	rows, _ := e.st.ListAccessLog(context.Background(), store.AccessLogFilter{Action: "trust_policy.updated"})
	if len(rows) != 3 || rows[0].Resource != "trust_policy:acme" || rows[0].Role != "owner" ||
		!strings.Contains(rows[0].Detail, `"patch":{"approvalExpiryHours":3}`) || !strings.Contains(rows[0].Detail, `"approvalExpirySeconds":10800`) ||
		!strings.Contains(rows[0].Detail, `"forkPolicy":"ignore"`) {
		t.Fatalf("audit rows: %d %+v", len(rows), rows)
	}
}

func TestTrustDirectory(t *testing.T) {
	e := newModeEnv(t, "", false)
	dir := tpBase + "/directory"
	code, m, _ := e.do("GET", dir+"?customerId=acme", e.auditor, "")
	if code != 200 || m["directory"] != nil || m["platformManaged"] != false {
		t.Fatalf("empty: %d %v", code, m)
	}
	set := func(user, puid, trust string) (int, map[string]any) {
		code, m, _ := e.do("PATCH", dir, e.owner, fmt.Sprintf(`{"customerId":"acme","userId":%q,"provider":"github","providerUsername":"%s-gh","providerUserId":%q,"ciTrust":%q}`, user, user, puid, trust))
		return code, m
	}
	if code, m := set("alice", "101", "admin"); code != 200 || m["directory"].(map[string]any)["memberCiTrustLevels"].(map[string]any)["alice"] != "admin" {
		t.Fatalf("set alice: %d %v", code, m)
	}
	set("bob", "202", "write")
	// Re-registering provider id 202 for carol replaces bob's link.
	code, m = set("carol", "202", "read")
	d := m["directory"].(map[string]any)
	if code != 200 || len(d["identityLinks"].([]any)) != 2 || d["memberCiTrustLevels"].(map[string]any)["bob"] != nil || len(d["teamMemberships"].([]any)) != 0 {
		t.Fatalf("replace by provider id: %d %v", code, m)
	}
	link := d["identityLinks"].([]any)[0].(map[string]any)
	if link["userId"] != "alice" || link["provider"] != "github" || link["providerUsername"] != "alice-gh" || link["providerUserId"] != "101" {
		t.Fatalf("link: %v", link)
	}
	if code, m := set("dave", "303", "owner"); code != 400 || !strings.Contains(fmt.Sprint(m["error"]), "none, read, write or admin") {
		t.Fatalf("bad ciTrust: %d %v", code, m)
	}
	if code, m, _ := e.do("PATCH", dir, e.owner, `{"customerId":"acme","userId":"x","provider":"github","providerUserId":"1","ciTrust":"read"}`); code != 400 || !strings.Contains(fmt.Sprint(m["error"]), "providerUsername") {
		t.Fatalf("missing username: %d %v", code, m)
	}
	if code, _, _ := e.do("PATCH", dir, e.auditor, `{"customerId":"acme","userId":"x","provider":"github","providerUsername":"x","providerUserId":"1","ciTrust":"read"}`); code != 403 {
		t.Fatalf("auditor set: %d", code)
	}
	code, m, _ = e.do("DELETE", dir+"?customerId=acme&userId=carol", e.owner, "")
	if code != 200 || m["removed"] != true || len(m["directory"].(map[string]any)["identityLinks"].([]any)) != 1 {
		t.Fatalf("remove: %d %v", code, m)
	}
	if code, m, _ := e.do("DELETE", dir+"?customerId=acme&userId=carol", e.owner, ""); code != 200 || m["removed"] != false {
		t.Fatalf("remove again: %d %v", code, m)
	}
	if code, m, _ := e.do("DELETE", dir+"?customerId=acme", e.owner, ""); code != 400 || m["error"] != "userId required" {
		t.Fatalf("remove without user: %d %v", code, m)
	}
	// Three sets and one removal are audited; the no-op removal is not.
	rows, _ := e.st.ListAccessLog(context.Background(), store.AccessLogFilter{Action: "trust_directory.updated"})
	if len(rows) != 4 || !strings.Contains(rows[0].Detail, `"op":"remove"`) || rows[0].Resource != "trust_directory:acme" {
		t.Fatalf("directory audit rows: %d %+v", len(rows), rows)
	}
}

func TestTrustWritesRefusedWhenPlatformManaged(t *testing.T) {
	for _, mode := range []config.Mode{config.ModePlatform, config.ModeHybrid, config.ModeObserved} {
		e := newModeEnv(t, mode, false)
		for _, c := range []struct{ method, path, body string }{
			{"PATCH", tpBase, `{"customerId":"acme","forkPolicy":"allow"}`},
			{"PATCH", tpBase + "/directory", `{"customerId":"acme","userId":"a","provider":"github","providerUsername":"a","providerUserId":"1","ciTrust":"admin"}`},
			{"DELETE", tpBase + "/directory?customerId=acme&userId=a", ""},
		} {
			code, m, _ := e.do(c.method, c.path, e.owner, c.body)
			if code != 409 || !strings.Contains(fmt.Sprint(m["error"]), "managed by the KiCI Platform") {
				t.Errorf("%s %s %s: %d %v", mode, c.method, c.path, code, m)
			}
		}
		code, m, _ := e.do("GET", tpBase+"?customerId=acme", e.owner, "")
		if code != 200 || m["policy"].(map[string]any)["platformManaged"] != true {
			t.Errorf("%s GET: %d %v", mode, code, m)
		}
		if code, m, _ := e.do("GET", tpBase+"/directory?customerId=acme", e.owner, ""); code != 200 || m["platformManaged"] != true {
			t.Errorf("%s GET directory: %d %v", mode, code, m)
		}
	}
}

// Held runs, the trust policy and the directory are org-wide: a
// routing-key-scoped token is refused on every one of those routes.
func TestTrustAndHeldRunRoutesRefuseScopedTokens(t *testing.T) {
	e := newModeEnv(t, "", true)
	code, m, _ := e.do("POST", "/api/v1/admin/tokens", e.owner, `{"label":"scoped","role":"owner","routingKey":"generic:acme:x"}`)
	if code != 201 {
		t.Fatalf("create scoped token: %d %v", code, m)
	}
	scoped := m["token"].(string)
	n := 0
	for _, r := range Routes {
		parts := strings.Fields(r)
		if !strings.Contains(parts[1], "/held-runs") && !strings.Contains(parts[1], "/trust-policy") {
			continue
		}
		n++
		body := ""
		if parts[0] == "POST" || parts[0] == "PATCH" {
			body = "{}"
		}
		code, m, _ := e.do(parts[0], parts[1]+"?customerId=acme&userId=a", scoped, body)
		if code != 403 || m["error"] != msgUnscopedRequired {
			t.Errorf("%s with a scoped token: %d %v", r, code, m)
		}
	}
	if n != 7 {
		t.Fatalf("checked %d routes, want 7", n)
	}
}

// approvalExpiryHours is range-checked before it is multiplied, so a huge
// value is a 400 naming the field and range, never an overflowed window.
func TestTrustPolicyExpiryHoursOverflow(t *testing.T) {
	e := newModeEnv(t, "", false)
	for _, hours := range []string{"9223372036854775807", "2562047788015216", "5124095576030432", "8785", "0", "-1"} {
		code, m, _ := e.do("PATCH", tpBase, e.owner, `{"customerId":"acme","approvalExpiryHours":`+hours+`}`)
		if code != 400 || m["error"] != "approvalExpiryHours must be an integer from 1 to 8784 (one year)" {
			t.Errorf("hours %s: %d %v", hours, code, m)
		}
	}
	if _, err := e.st.GetTrustPolicy(context.Background(), "acme"); err == nil {
		t.Fatal("an out-of-range expiry stored a policy")
	}
	code, m, _ := e.do("PATCH", tpBase, e.owner, `{"customerId":"acme","approvalExpiryHours":8784}`)
	if p, _ := m["policy"].(map[string]any); code != 200 || p["approvalExpirySeconds"].(float64) != 8784*3600 {
		t.Fatalf("8784 h: %d %v", code, m)
	}
	if code, m, _ := e.do("PATCH", tpBase, e.owner, `{"customerId":"acme","approvalExpirySeconds":31622401}`); code != 400 ||
		!strings.Contains(fmt.Sprint(m["error"]), "approvalExpirySeconds must be an integer from 60 to 31622400") {
		t.Fatalf("seconds past a year: %d %v", code, m)
	}
}

// Directory members: a known provider, a numeric provider user id, and no
// user id that could pass for an admin-token approver.
func TestTrustDirectoryFieldValidation(t *testing.T) {
	e := newModeEnv(t, "", false)
	dir := tpBase + "/directory"
	for _, c := range []struct{ user, provider, puid, want string }{
		{"alice", "github", "abc", "providerUserId must be the provider's immutable user id"},
		{"alice", "github", "12a", "providerUserId must be the provider's immutable user id"},
		{"alice", "github", "123456789012345678901", "1-20 digits"},
		{"alice", "evil", "1", `provider "evil" must be one of github, gitea, gitlab, bitbucket`},
		{"alice", "GitHub", "1", "must be one of"},
		{"service:tok-1", "github", "1", `userId must not start with "service:": that prefix is reserved for admin-token approvers`},
		{"service:", "github", "1", "reserved for admin-token approvers"},
		{"al ice", "github", "1", "no whitespace or control characters"},
		{"al\tice", "github", "1", "no whitespace or control characters"},
	} {
		body, _ := json.Marshal(map[string]string{"customerId": "acme", "userId": c.user, "provider": c.provider,
			"providerUsername": "gh-user", "providerUserId": c.puid, "ciTrust": "write"})
		if code, m, _ := e.do("PATCH", dir, e.owner, string(body)); code != 400 || !strings.Contains(fmt.Sprint(m["error"]), c.want) {
			t.Errorf("%s: %d %v, want 400 %q", body, code, m, c.want)
		}
	}
	if members, _ := e.st.ListDirectoryMembers(context.Background(), "acme"); len(members) != 0 {
		t.Fatalf("refused members stored: %+v", members)
	}
	for i, c := range []struct{ provider, id string }{{"github", "100"}, {"gitea", "101"}, {"gitlab", "102"},
		{"bitbucket", "{6a2c3d4e-1f20-4b5c-9d8e-7f6a5b4c3d2e}"}, {"bitbucket", "557058:6a2c3d4e-1f20-4b5c-9d8e-7f6a5b4c3d2e"}} {
		body := fmt.Sprintf(`{"customerId":"acme","userId":"u%d","provider":%q,"providerUsername":"x","providerUserId":%q,"ciTrust":"read"}`, i, c.provider, c.id)
		if code, m, _ := e.do("PATCH", dir, e.owner, body); code != 200 {
			t.Errorf("%s: %d %v", body, code, m)
		}
	}
}
