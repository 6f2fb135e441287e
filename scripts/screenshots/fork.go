package main

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"kici.dev/kici/internal/testutil/ghfake"
)

// prWorkflow runs on pull requests; a fork's is held by the default trust
// policy, which is what the held runs page and the run page show.
const prWorkflow = `name: pr
on:
  pull_request:
    events: [opened]
jobs:
  check:
    steps:
      - run: echo checked
`

// Demo GitHub App of the fork pull request (its REST API is ghfake).
const (
	demoAppID     = 4242
	demoRepo      = "demo/app"
	demoHookToken = "screenshots-webhook-secret"
)

// forkPullRequest adds a GitHub App source whose API is a fake holding
// the repository's lock file, posts a signed pull_request webhook from a
// fork (alice-dev/app) and waits for its run to be held; it returns the
// run's id and a function that stops the fake.
func forkPullRequest(url, token, tmp, repo, sha string, admin func(...string) (string, error)) (string, func(), error) {
	lock, err := os.ReadFile(filepath.Join(repo, ".kici/kici.lock.json"))
	if err != nil {
		return "", nil, err
	}
	fake := ghfake.New(demoAppID)
	for _, ref := range []string{"main", sha} {
		fake.SetFile(demoRepo, ref, ".kici/kici.lock.json", lock)
	}
	fake.SetBranch(demoRepo, "main", sha)
	fake.SetPermission(demoRepo, "alice-dev", "read")
	keyFile := filepath.Join(tmp, "app.pem")
	if err := os.WriteFile(keyFile, []byte(fake.PrivateKeyPEM), 0o600); err != nil {
		fake.Close()
		return "", nil, err
	}
	src, err := admin("-q", "source", "add", "github", "--org", "demo", "--name", "github", "--app-id", fmt.Sprint(demoAppID),
		"--private-key", "@"+keyFile, "--api-url", fake.URL, "--webhook-secret", demoHookToken)
	if err != nil {
		fake.Close()
		return "", nil, err
	}
	body, _ := json.Marshal(map[string]any{"action": "opened", "number": 12, "installation": map[string]any{"id": 9},
		"pull_request": map[string]any{"number": 12, "title": "Cache the parsed lock file between deliveries",
			"html_url": "https://github.com/demo/app/pull/12", "user": map[string]any{"login": "alice-dev"},
			"head": map[string]any{"ref": "cache-lock", "sha": sha, "repo": map[string]any{"full_name": "alice-dev/app", "html_url": "https://github.com/alice-dev/app"}},
			"base": map[string]any{"ref": "main", "sha": sha, "repo": map[string]any{"full_name": demoRepo}}},
		"repository": map[string]any{"full_name": demoRepo, "default_branch": "main", "clone_url": "file://" + repo},
		"sender":     map[string]any{"login": "alice-dev", "id": 4711}})
	mac := hmac.New(sha256.New, []byte(demoHookToken))
	mac.Write(body)
	req, _ := http.NewRequest("POST", url+"/webhook/demo/github/"+src, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "pull_request")
	req.Header.Set("X-GitHub-Delivery", "demo-pr-12")
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fake.Close()
		return "", nil, err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		fake.Close()
		return "", nil, fmt.Errorf("pull_request webhook: %d", resp.StatusCode)
	}
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		var list struct {
			Runs []struct{ RunID, Status string } `json:"runs"`
		}
		if err := getJSON(fmt.Sprintf("%s/api/v1/admin/runs?deliveryId=github:%d:demo-pr-12", url, demoAppID), token, &list); err != nil {
			fake.Close()
			return "", nil, err
		}
		if len(list.Runs) > 0 && list.Runs[0].Status == "held" {
			return list.Runs[0].RunID, fake.Close, nil
		}
		time.Sleep(300 * time.Millisecond)
	}
	fake.Close()
	return "", nil, errors.New("the fork pull request's run was not held within a minute")
}
