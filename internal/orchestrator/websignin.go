package orchestrator

import (
	"fmt"
	"os"

	"kici.dev/kici/internal/auth/idp"
	"kici.dev/kici/internal/web"
)

// webSignIn reads KICI_WEB_SIGNIN_CONFIG (nil when unset): the identity
// providers of the sign-in page, whose callbacks are under publicURL.
func webSignIn(publicURL string) (*web.SignIn, error) {
	path := os.Getenv("KICI_WEB_SIGNIN_CONFIG")
	if path == "" {
		return nil, nil
	}
	c, err := idp.LoadConfig(path)
	if err != nil {
		return nil, fmt.Errorf("KICI_WEB_SIGNIN_CONFIG: %w", err)
	}
	if publicURL == "" && len(c.Providers) > 0 {
		return nil, fmt.Errorf("KICI_WEB_SIGNIN_CONFIG needs KICI_PUBLIC_URL: the providers send people back to <public URL>/ui/login/<name>/callback")
	}
	si := &web.SignIn{Roles: c.RoleMap()}
	for _, pc := range c.Providers {
		si.Providers = append(si.Providers, idp.New(pc, publicURL+"/ui/login/"+pc.Name+"/callback", nil))
	}
	return si, nil
}
