package webhook

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/google/uuid"

	"kici.dev/kici/internal/provider"
	"kici.dev/kici/internal/store"
)

// Header shapes as Gitea documents them (docs.gitea.com, "Webhooks"):
// X-Gitea-Event, X-Gitea-Delivery and X-Gitea-Signature, the bare hex
// HMAC-SHA256 of the body without a "sha256=" prefix.
func TestGiteaDocumentedHeadersAreAccepted(t *testing.T) {
	e := newGHEnv(t, Options{}, nil, "k")
	ctx := context.Background()
	for _, tc := range []struct{ name, header string }{{"gitea-named", "X-Gitea-Signature"}, {"gitea-default", ""}} {
		src := &store.Source{ID: uuid.NewString(), OrgID: "acme", Name: tc.name, Provider: provider.Generic, RoutingKey: "generic:acme:" + tc.name,
			VerificationMethod: VerifyHMACSHA256, WebhookSecret: "gitea-secret", Enabled: true}
		set := &store.SourceSettings{SignatureHeader: tc.header, Git: &store.GitConfig{Preset: "gitea", GitURLTemplate: "https://g/{repo}.git"}}
		if err := e.st.CreateSourceWithSettings(ctx, src, set, nil); err != nil {
			t.Fatal(err)
		}
		body := []byte(`{"ref":"refs/heads/main","after":"1111111111111111111111111111111111111111","repository":{"full_name":"acme/app"}}`)
		m := hmac.New(sha256.New, []byte("gitea-secret"))
		m.Write(body)
		bare := hex.EncodeToString(m.Sum(nil))
		url := e.srv.URL + "/webhook/acme/generic/" + tc.name
		hdr := map[string]string{"Content-Type": "application/json", "X-Gitea-Event": "push", "X-Gitea-Event-Type": "push",
			"X-Gitea-Delivery": "f6266f16-1bf3-46a5-9ea4-602e06ead473", "X-Gitea-Signature": bare}
		if code, r := postRaw(t, url, body, hdr); code != 202 {
			t.Fatalf("%s: documented Gitea delivery: %d %+v", tc.name, code, r)
		}
		hdr["X-Gitea-Signature"] = strings.Repeat("0", 64)
		hdr["X-Gitea-Delivery"] = "other"
		if code, _ := postRaw(t, url, body, hdr); code != 401 {
			t.Fatalf("%s: a wrong bare signature must stay 401, got %d", tc.name, code)
		}
		hdr["X-Gitea-Signature"] = bare[:60]
		if code, _ := postRaw(t, url, body, hdr); code != 401 {
			t.Fatalf("%s: a truncated signature must stay 401, got %d", tc.name, code)
		}
	}
}

// Header shapes as GitLab documents them (docs.gitlab.com, "Webhook
// events"): X-Gitlab-Event names carry a space ("Push Hook"), the secret
// travels in X-Gitlab-Token, the delivery id in X-Gitlab-Event-UUID.
func TestGitLabDocumentedHeadersAreAccepted(t *testing.T) {
	e := newGHEnv(t, Options{}, nil, "k")
	ctx := context.Background()
	src := &store.Source{ID: uuid.NewString(), OrgID: "acme", Name: "gitlab", Provider: provider.Generic, RoutingKey: "generic:acme:gitlab",
		VerificationMethod: VerifyBearerToken, WebhookSecret: "gl-token", Enabled: true}
	set := &store.SourceSettings{TokenHeader: "X-Gitlab-Token", Git: &store.GitConfig{Preset: "gitlab-repo", GitURLTemplate: "https://gl/{repo}.git"}}
	if err := e.st.CreateSourceWithSettings(ctx, src, set, nil); err != nil {
		t.Fatal(err)
	}
	url := e.srv.URL + "/webhook/acme/generic/gitlab"
	body := []byte(`{"object_kind":"push","ref":"refs/heads/main","after":"1111111111111111111111111111111111111111","project":{"path_with_namespace":"acme/app"}}`)
	for i, ev := range []string{"Push Hook", "Tag Push Hook", "Merge Request Hook", "Note Hook"} {
		hdr := map[string]string{"Content-Type": "application/json", "X-Gitlab-Event": ev, "X-Gitlab-Token": "gl-token",
			"X-Gitlab-Event-UUID": "13792a34-cac6-4fda-95a8-c58e00a3954" + string(rune('0'+i)), "X-Gitlab-Instance": "https://gitlab.example.com"}
		code, r := postRaw(t, url, body, hdr)
		if code != 202 {
			t.Fatalf("%q: %d %+v", ev, code, r)
		}
		d, err := e.st.GetDelivery(ctx, r.DeliveryID)
		if err != nil || d.Event != ev {
			t.Fatalf("%q: delivery %+v %v", ev, d, err)
		}
	}
	for _, bad := range []string{"Push\tHook", "Push Hook \u00e9"} {
		hdr := map[string]string{"X-Gitlab-Event": bad, "X-Gitlab-Token": "gl-token", "X-Gitlab-Event-UUID": uuid.NewString()}
		if code, r := postRaw(t, url, body, hdr); code != 400 || !strings.Contains(r.Error, "X-Gitlab-Event") {
			t.Fatalf("%q: want 400 naming X-Gitlab-Event, got %d %+v", bad, code, r)
		}
	}
}
