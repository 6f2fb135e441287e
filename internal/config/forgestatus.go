package config

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// ForgeStatus holds the settings of the forge reporter (check runs and
// commit statuses, package forgestatus).
type ForgeStatus struct {
	// PublicURL is KICI_PUBLIC_URL without a trailing slash ("" = no links).
	PublicURL string
	// TTLDays is KICI_CHECK_RUN_TRACKING_TTL_DAYS (default 7, 0 = keep),
	// the default of the cluster setting checkRunTrackingTtlDays.
	TTLDays int64
}

// LoadForgeStatus reads the forge-reporter variables from environ
// ("KEY=value" form). Errors name the variable and what is accepted.
func LoadForgeStatus(environ []string) (*ForgeStatus, error) {
	fs := &ForgeStatus{TTLDays: 7}
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		v = strings.TrimSpace(v)
		switch {
		case k == "KICI_PUBLIC_URL" && v != "":
			u, err := url.Parse(v)
			if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
				return nil, fmt.Errorf("KICI_PUBLIC_URL=%q: must be an http(s) URL without credentials, query or fragment, e.g. https://ci.example.com", v)
			}
			fs.PublicURL = strings.TrimRight(v, "/")
		case k == "KICI_CHECK_RUN_TRACKING_TTL_DAYS" && v != "":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 || n > 3650 {
				return nil, fmt.Errorf("KICI_CHECK_RUN_TRACKING_TTL_DAYS=%q: must be a whole number of days between 0 and 3650", v)
			}
			fs.TTLDays = n
		}
	}
	return fs, nil
}
