package config

import "strings"

// sensitiveMarkers flag KICI_* names that hold credentials or key
// material.
var sensitiveMarkers = []string{"TOKEN", "SECRET", "PASSWORD", "PASSWD", "PRIVATE_KEY", "API_KEY", "CREDENTIAL", "DATABASE_URL"}

// SensitiveEnv returns the names of the KICI_* variables in environ ("K=V"
// entries) that hold credentials: KICI_BOOTSTRAP_ADMIN_TOKEN,
// KICI_DATABASE_URL (it may embed a password), KICI_SECRET_KEY and its
// _FILE/_OLD forms, and any other KICI_* name containing TOKEN, SECRET,
// PASSWORD, PASSWD, PRIVATE_KEY, API_KEY or CREDENTIAL. The orchestrator
// unsets them once its configuration is loaded so that no child process
// inherits them.
func SensitiveEnv(environ []string) []string {
	var out []string
	for _, kv := range environ {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(k, "KICI_") {
			continue
		}
		for _, m := range sensitiveMarkers {
			if strings.Contains(k, m) {
				out = append(out, k)
				break
			}
		}
	}
	return out
}
