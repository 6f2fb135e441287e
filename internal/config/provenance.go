package config

import (
	"fmt"
	"net"
	"net/url"
	"strings"
)

// ParseIssuer validates KICI_ORCHESTRATOR_PROVENANCE_ISSUER: empty (signing
// off), or an absolute https URL without query or fragment; plain http is
// accepted only for loopback hosts (local testing). A trailing slash is
// kept as written: the issuer is compared byte for byte with the token's
// iss claim.
func ParseIssuer(v string) (string, error) {
	if v == "" {
		return "", nil
	}
	u, err := url.Parse(v)
	bad := func(why string) (string, error) {
		return "", fmt.Errorf("KICI_ORCHESTRATOR_PROVENANCE_ISSUER=%q: %s", v, why)
	}
	if err != nil || u.Host == "" || u.User != nil {
		return bad("must be an absolute URL such as https://ci.example.com")
	}
	if u.RawQuery != "" || u.Fragment != "" || strings.Contains(v, "#") {
		return bad("must not have a query or fragment")
	}
	switch u.Scheme {
	case "https":
	case "http":
		host := u.Hostname()
		ip := net.ParseIP(host)
		if host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return bad("http is only allowed for loopback hosts; use https")
		}
	default:
		return bad("scheme must be https")
	}
	return v, nil
}
