package web

import (
	"context"
	"encoding/json"
	"strings"
)

// pullInfo is what a delivery's payload says about the pull (merge)
// request a run was made for: what a reviewer needs to decide a held fork
// run. The zero value means the delivery was not a pull request.
type pullInfo struct {
	// Number is the pull request's number (a GitLab merge request's iid).
	Number int
	// Title is its title; Author the login of the person who opened it.
	Title, Author string
	// HeadRepo names the repository its changes come from (the fork, for
	// a fork pull request), HeadRepoURL that repository's web page.
	HeadRepo, HeadRepoURL string
	// URL is the pull request's web page, DiffURL its changed files.
	URL, DiffURL string
}

// pullFromPayload reads the pull request of a webhook body: GitHub's and
// Gitea/Forgejo's pull_request object, or GitLab's merge request hook
// (object_attributes). Links that are not http(s) are dropped, so a
// javascript: or data: URL from a payload never becomes a link.
func pullFromPayload(body json.RawMessage) pullInfo {
	type repo struct {
		FullName          string `json:"full_name"`
		HTMLURL           string `json:"html_url"`
		PathWithNamespace string `json:"path_with_namespace"`
		WebURL            string `json:"web_url"`
	}
	var pl struct {
		PullRequest *struct {
			Number  int    `json:"number"`
			Title   string `json:"title"`
			HTMLURL string `json:"html_url"`
			User    struct {
				Login string `json:"login"`
			} `json:"user"`
			Head struct {
				Repo *repo `json:"repo"`
			} `json:"head"`
		} `json:"pull_request"`
		ObjectKind       string `json:"object_kind"`
		ObjectAttributes *struct {
			IID    int    `json:"iid"`
			Title  string `json:"title"`
			URL    string `json:"url"`
			Source *repo  `json:"source"`
		} `json:"object_attributes"`
		User struct {
			Username string `json:"username"`
		} `json:"user"`
	}
	var p pullInfo
	if json.Unmarshal(body, &pl) != nil {
		return p
	}
	switch {
	case pl.PullRequest != nil:
		pr := pl.PullRequest
		p = pullInfo{Number: pr.Number, Title: pr.Title, Author: pr.User.Login, URL: webURL(pr.HTMLURL)}
		if r := pr.Head.Repo; r != nil {
			p.HeadRepo, p.HeadRepoURL = r.FullName, webURL(r.HTMLURL)
		} else {
			p.HeadRepo = "(deleted fork)"
		}
		if p.URL != "" {
			p.DiffURL = p.URL + "/files"
		}
	case pl.ObjectKind == "merge_request" && pl.ObjectAttributes != nil:
		mr := pl.ObjectAttributes
		p = pullInfo{Number: mr.IID, Title: mr.Title, Author: pl.User.Username, URL: webURL(mr.URL)}
		if r := mr.Source; r != nil {
			p.HeadRepo, p.HeadRepoURL = r.PathWithNamespace, webURL(r.WebURL)
		}
		if p.URL != "" {
			p.DiffURL = p.URL + "/diffs"
		}
	}
	return p
}

// webURL returns u when it is an http(s) URL, else "".
func webURL(u string) string {
	if strings.HasPrefix(u, "https://") || strings.HasPrefix(u, "http://") {
		return u
	}
	return ""
}

// commitTitle is the first line of a commit message (or a pull request's
// title), shortened for a list.
func commitTitle(msg string) string {
	msg = strings.TrimSpace(msg)
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = strings.TrimSpace(msg[:i])
	}
	return truncate(90, msg)
}

// deliveryFacts caches what the pages read of deliveries' payloads, by
// delivery id, for one request: the runs of one push share a delivery.
type deliveryFacts struct {
	u    *UI
	seen map[string]*payloadFacts
}

// payloadFacts are the commit and pull request a delivery describes.
type payloadFacts struct {
	Commit commitInfo
	Pull   pullInfo
}

func (u *UI) newDeliveryFacts() *deliveryFacts {
	return &deliveryFacts{u: u, seen: map[string]*payloadFacts{}}
}

// get returns the facts of delivery id; "" or a delivery that is gone
// gives zero facts (a store error too: the page shows what it can).
func (f *deliveryFacts) get(ctx context.Context, id string) *payloadFacts {
	if pf, ok := f.seen[id]; ok {
		return pf
	}
	pf := &payloadFacts{}
	if id != "" {
		if del, err := f.u.d.Store.GetDelivery(ctx, id); err == nil && del != nil {
			pf.Commit, pf.Pull = commitFromPayload(del.Payload), pullFromPayload(del.Payload)
		}
	}
	f.seen[id] = pf
	return pf
}
