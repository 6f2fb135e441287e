package forgestatus

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"kici.dev/kici/internal/provider"
	"kici.dev/kici/internal/runs/status"

	"kici.dev/kici/internal/ghapi"
	"kici.dev/kici/internal/provider/universal"
	"kici.dev/kici/internal/store"
)

// target is where one source's reports go: the provider kind and, for
// GitHub, the REST client; for Gitea and GitLab the API root and the
// source's credential (never logged, never part of an error).
type target struct {
	provider string
	gh       *ghapi.Client
	apiBase  string
	credType string
	username string
	cred     string
}

// targetOf returns the report target of a source, ok=false when the
// source's forge has no status API kici speaks (local and plain generic
// sources, custom presets, or a forge without a known API root).
func targetOf(src *store.Source, set *store.SourceSettings, gh func(*store.SourceSettings) (*ghapi.Client, error)) (*target, bool, error) {
	if src == nil || set == nil {
		return nil, false, nil
	}
	switch {
	case src.Provider == provider.GitHub && set.GitHub != nil:
		c, err := gh(set)
		if err != nil {
			return nil, false, err
		}
		p := store.CheckProviderGitHubStatus
		if c.IsApp() {
			p = store.CheckProviderGitHubChecks
		}
		return &target{provider: p, gh: c}, true, nil
	case src.Provider == provider.Generic && set.Git != nil:
		g := set.Git
		t := &target{apiBase: apiRoot(g), credType: g.CredentialType, username: g.Username, cred: g.Credential}
		switch g.Preset {
		case universal.PresetGitea, universal.PresetForgejo, universal.PresetGogs:
			t.provider = store.CheckProviderGitea
		case universal.PresetGitLabRepo:
			t.provider = store.CheckProviderGitLab
		default:
			return nil, false, nil
		}
		if t.apiBase == "" {
			return nil, false, nil
		}
		return t, true, nil
	}
	return nil, false, nil
}

// apiRoot is the forge's web root: apiBaseUrl, else the http(s) part of
// the clone URL template before the repository placeholder.
func apiRoot(g *store.GitConfig) string {
	if g.APIBaseURL != "" {
		return strings.TrimRight(g.APIBaseURL, "/")
	}
	t := g.GitURLTemplate
	i := strings.Index(t, "{repo}")
	if j := strings.Index(t, "{owner}"); i < 0 || (j >= 0 && j < i) {
		i = j
	}
	if i <= 0 {
		return ""
	}
	u, err := url.Parse(t[:i])
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return ""
	}
	return strings.TrimRight(u.Scheme+"://"+u.Host+u.Path, "/")
}

// httpError is a forge's answer outside 2xx (Gitea, GitLab).
type httpError struct {
	method, path string
	status       int
	header       http.Header
	msg          string
}

func (e *httpError) Error() string {
	return fmt.Sprintf("%s %s: HTTP %d: %s", e.method, e.path, e.status, e.msg)
}

// postJSON posts body to t.apiBase+path with the source's credential.
func (t *target) postJSON(ctx context.Context, hc *http.Client, path string, body json.RawMessage) error {
	req, err := http.NewRequestWithContext(ctx, "POST", t.apiBase+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "kici")
	switch {
	case t.credType == "basic":
		req.SetBasicAuth(t.username, t.cred)
	case t.cred != "" && t.provider == store.CheckProviderGitLab:
		req.Header.Set("PRIVATE-TOKEN", t.cred)
	case t.cred != "":
		req.Header.Set("Authorization", "token "+t.cred)
	}
	resp, err := hc.Do(req)
	if err != nil {
		// The URL carries no credential; the error names the path only.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("POST %s: %w", path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 == 2 {
		return nil
	}
	var e struct {
		Message any `json:"message"`
	}
	_ = json.Unmarshal(raw, &e)
	msg := http.StatusText(resp.StatusCode)
	if e.Message != nil {
		msg = truncate(fmt.Sprint(e.Message), 300)
	}
	return &httpError{method: "POST", path: path, status: resp.StatusCode, header: resp.Header.Clone(), msg: msg}
}

// repoParts splits owner/name for a Gitea path.
func repoParts(repo string) (string, string, error) {
	owner, name, ok := strings.Cut(repo, "/")
	if !ok || owner == "" || name == "" || strings.Contains(name, "/") {
		return "", "", fmt.Errorf("invalid repository %q (want owner/name)", repo)
	}
	return owner, name, nil
}

// giteaStatusPath is POST /api/v1/repos/{owner}/{repo}/statuses/{sha}
// (Gitea, Forgejo and Gogs "Create a commit status").
func giteaStatusPath(repo, sha string) (string, error) {
	owner, name, err := repoParts(repo)
	if err != nil {
		return "", err
	}
	return "/api/v1/repos/" + url.PathEscape(owner) + "/" + url.PathEscape(name) + "/statuses/" + url.PathEscape(sha), nil
}

// gitlabStatusPath is POST /api/v4/projects/{id}/statuses/{sha} with the
// project's URL-encoded path as its id (GitLab "Commits API: set the
// pipeline status of a commit").
func gitlabStatusPath(repo, sha string) string {
	return "/api/v4/projects/" + url.PathEscape(repo) + "/statuses/" + url.PathEscape(sha)
}

// gitlabBody is GitLab's commit status: its own state words, "name" for
// the context.
func gitlabBody(v *jobView, o outcome, publicURL string) map[string]any {
	b := statusBody(v, o, publicURL)
	b["name"] = b["context"]
	delete(b, "context")
	b["state"] = gitlabState(v.job, o)
	return b
}

// GitLab commit-status states (GitLab REST "Commits: set the pipeline
// status of a commit").
const (
	gitlabPending  = "pending"
	gitlabRunning  = "running"
	gitlabSuccess  = "success"
	gitlabFailed   = "failed"
	gitlabCanceled = "canceled"
	gitlabSkipped  = "skipped"
)

// gitlabState maps a job to GitLab's commit-status states (pending,
// running, success, failed, canceled, skipped). A skipped job is always
// `skipped`, whatever skipped it: GitLab has the word, and the failure that
// caused it is shown on the upstream's own status, so the downstream jobs
// of a failed or rejected run do not each show `failed`.
func gitlabState(j *store.Job, o outcome) string {
	switch {
	case o.status == checkInProgress:
		return gitlabRunning
	case !o.terminal || j.Status == status.JobHeld:
		return gitlabPending
	case j.Status == status.JobSuccess:
		return gitlabSuccess
	case j.Status == status.JobCancelled:
		return gitlabCanceled
	case j.Status == status.JobSkipped:
		return gitlabSkipped
	}
	return gitlabFailed
}

// deliverGitHub sends a row to GitHub: a commit status, or a check run
// (created once, then updated by id; a check completed earlier, such as
// an "action required" hold, is never reopened: a new one is created).
// It returns the external id to record.
func (r *Reporter) deliverGitHub(ctx context.Context, t *target, c *store.CheckRun) (string, error) {
	inst := int64(0)
	if t.gh.IsApp() {
		var err error
		if inst, err = r.installation(ctx, t.gh, c.Repo); err != nil {
			return "", err
		}
	}
	var body map[string]any
	if err := json.Unmarshal(c.DesiredBody, &body); err != nil {
		return "", err
	}
	if t.provider == store.CheckProviderGitHubStatus {
		return "", t.gh.CreateStatus(ctx, inst, c.Repo, c.SHA, body)
	}
	reopen := c.ExternalID != "" && strings.HasPrefix(c.PostedState, checkCompleted) && c.DesiredState != c.PostedState
	if c.ExternalID != "" && !reopen {
		id, _ := strconv.ParseInt(c.ExternalID, 10, 64)
		delete(body, "head_sha")
		return c.ExternalID, t.gh.UpdateCheckRun(ctx, inst, c.Repo, id, body)
	}
	if c.CreateAttemptedAt != nil && !reopen {
		// A create may have reached GitHub before a crash: look it up by
		// external id instead of creating a second check.
		id, err := t.gh.FindCheckRun(ctx, inst, c.Repo, c.SHA, c.Name, c.JobID)
		if err != nil {
			return "", err
		}
		if id > 0 {
			delete(body, "head_sha")
			return strconv.FormatInt(id, 10), t.gh.UpdateCheckRun(ctx, inst, c.Repo, id, body)
		}
	}
	if err := r.st.MarkCheckRunCreateAttempted(ctx, c.JobID, r.now()); err != nil {
		return "", err
	}
	id, err := t.gh.CreateCheckRun(ctx, inst, c.Repo, body)
	if err != nil {
		return "", err
	}
	return strconv.FormatInt(id, 10), nil
}

// deliver sends one row to its forge and returns the external id.
func (r *Reporter) deliver(ctx context.Context, t *target, c *store.CheckRun) (string, error) {
	switch t.provider {
	case store.CheckProviderGitHubChecks, store.CheckProviderGitHubStatus:
		return r.deliverGitHub(ctx, t, c)
	case store.CheckProviderGitea:
		p, err := giteaStatusPath(c.Repo, c.SHA)
		if err != nil {
			return "", err
		}
		return "", t.postJSON(ctx, r.http, p, c.DesiredBody)
	case store.CheckProviderGitLab:
		return "", t.postJSON(ctx, r.http, gitlabStatusPath(c.Repo, c.SHA), c.DesiredBody)
	}
	return "", fmt.Errorf("unknown provider %q", t.provider)
}
