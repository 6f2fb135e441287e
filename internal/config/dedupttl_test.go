package config

import (
	"strings"
	"testing"
	"time"
)

// KICI_WEBHOOK_DEDUP_TTL_MS defaults to 24 h, accepts 1 s – 365 days and
// names itself in the error otherwise.
func TestWebhookDedupTTL(t *testing.T) {
	get := func(v string) func(string) string {
		return func(k string) string {
			if k == "KICI_WEBHOOK_DEDUP_TTL_MS" {
				return v
			}
			return ""
		}
	}
	var in Ingress
	if errs := loadIngress(get(""), &in); len(errs) != 0 || in.WebhookDedupTTL != 24*time.Hour {
		t.Fatalf("default: %v %v", in.WebhookDedupTTL, errs)
	}
	if errs := loadIngress(get("5000"), &in); len(errs) != 0 || in.WebhookDedupTTL != 5*time.Second {
		t.Fatalf("5000: %v %v", in.WebhookDedupTTL, errs)
	}
	for _, bad := range []string{"999", "-1", "x", "31536000001"} {
		errs := loadIngress(get(bad), &in)
		if len(errs) != 1 || !strings.Contains(errs[0].Error(), "KICI_WEBHOOK_DEDUP_TTL_MS") {
			t.Errorf("%s: %v", bad, errs)
		}
	}
}
