package idp

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"kici.dev/kici/internal/auth"
)

// httpTimeout bounds each request to a provider.
const httpTimeout = 15 * time.Second

// maxAPIBody caps a forge API response read at sign-in.
const maxAPIBody = 4 << 20

// forgeIdentity reads the signed-in person from the forge's API with the
// access token: the user (login, name, e-mail) and, where the API gives
// them, organisations and "org/team" memberships (first page, up to 100
// each). A membership call that fails adds no groups: a rule needing a
// group then does not match, so the failure never grants a role.
func (p *Provider) forgeIdentity(ctx context.Context, token string) (auth.Identity, error) {
	id := auth.Identity{Kind: p.cfg.Kind}
	switch p.cfg.Kind {
	case auth.ProviderGitHub:
		var u struct{ Login, Name, Email string }
		if err := p.getJSON(ctx, token, p.cfg.APIURL+"/user", &u); err != nil {
			return id, err
		}
		id.Subject, id.Login, id.Name, id.Email = u.Login, u.Login, u.Name, u.Email
		var orgs []struct{ Login string }
		if p.getJSON(ctx, token, p.cfg.APIURL+"/user/orgs?per_page=100", &orgs) == nil {
			for _, o := range orgs {
				id.Groups = append(id.Groups, o.Login)
			}
		}
		var teams []struct {
			Slug         string
			Organization struct{ Login string }
		}
		if p.getJSON(ctx, token, p.cfg.APIURL+"/user/teams?per_page=100", &teams) == nil {
			for _, t := range teams {
				id.Groups = append(id.Groups, t.Organization.Login+"/"+t.Slug)
			}
		}
	case auth.ProviderGitea:
		var u struct {
			Login    string
			FullName string `json:"full_name"`
			Email    string
		}
		if err := p.getJSON(ctx, token, p.cfg.URL+"/api/v1/user", &u); err != nil {
			return id, err
		}
		id.Subject, id.Login, id.Name, id.Email = u.Login, u.Login, u.FullName, u.Email
		// Gitea's Organization carries the name as "username" (and, in
		// newer versions, "name" too).
		var orgs []giteaOrg
		if p.getJSON(ctx, token, p.cfg.URL+"/api/v1/user/orgs?limit=50", &orgs) == nil {
			for _, o := range orgs {
				id.Groups = append(id.Groups, o.login())
			}
		}
		var teams []struct {
			Name         string
			Organization *giteaOrg
		}
		if p.getJSON(ctx, token, p.cfg.URL+"/api/v1/user/teams?limit=50", &teams) == nil {
			for _, t := range teams {
				if t.Organization != nil && t.Organization.login() != "" {
					id.Groups = append(id.Groups, t.Organization.login()+"/"+t.Name)
				}
			}
		}
	case auth.ProviderGitLab:
		var u struct{ Username, Name, Email string }
		if err := p.getJSON(ctx, token, p.cfg.URL+"/api/v4/user", &u); err != nil {
			return id, err
		}
		id.Subject, id.Login, id.Name, id.Email = u.Username, u.Username, u.Name, u.Email
		var groups []struct {
			FullPath string `json:"full_path"`
		}
		if p.getJSON(ctx, token, p.cfg.URL+"/api/v4/groups?min_access_level=10&per_page=100", &groups) == nil {
			for _, g := range groups {
				id.Groups = append(id.Groups, g.FullPath)
			}
		}
	}
	if id.Subject == "" || strings.ContainsAny(id.Subject, " \t\r\n") {
		return id, fmt.Errorf("%w: %s returned no usable login", ErrDenied, p.cfg.Name)
	}
	return id, nil
}

func (p *Provider) getJSON(ctx context.Context, token, url string, into any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "application/json")
	resp, err := p.client.Do(req)
	if err != nil {
		return fmt.Errorf("%s API: %w", p.cfg.Name, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAPIBody))
	if err != nil {
		return fmt.Errorf("%s API: %w", p.cfg.Name, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%w: %s API %s answered %s", ErrDenied, p.cfg.Name, req.URL.Path, resp.Status)
	}
	if err := json.Unmarshal(body, into); err != nil {
		return fmt.Errorf("%s API %s: %w", p.cfg.Name, req.URL.Path, err)
	}
	return nil
}

// giteaOrg is an organisation in Gitea's API answers.
type giteaOrg struct{ Username, Name string }

func (o giteaOrg) login() string {
	if o.Username != "" {
		return o.Username
	}
	return o.Name
}
