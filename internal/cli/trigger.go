package cli

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"strings"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"kici.dev/kici/internal/api/apitypes"
)

// ZeroSHA is the "before" of a push with no parent commit.
const ZeroSHA = "0000000000000000000000000000000000000000"

// LocalPushPayload is the body `source trigger-local` posts (a push event of
// a local source, X-Event-Type: push).
type LocalPushPayload struct {
	// Ref is the full ref, e.g. "refs/heads/main".
	Ref string `json:"ref"`
	// Before is the first parent of After, or ZeroSHA.
	Before string `json:"before"`
	// After is the commit to build.
	After string `json:"after"`
	// Repository names the source and its path.
	Repository LocalRepository `json:"repository"`
	// Sender is the local user.
	Sender LocalSender `json:"sender"`
	// HeadCommit is the built commit's message and author (GitHub's push
	// field), shown on the run page; nil when git cannot read them.
	HeadCommit *LocalCommit `json:"head_commit,omitempty"`
}

// LocalCommit is the head_commit of a local push.
type LocalCommit struct {
	ID      string `json:"id"`
	Message string `json:"message"`
	Author  struct {
		Name string `json:"name"`
	} `json:"author"`
}

// LocalRepository identifies the repository of a local push.
type LocalRepository struct {
	// FullName is "<org>/<source name>".
	FullName string `json:"full_name"`
	// Path is the repository's absolute path.
	Path string `json:"path"`
}

// LocalSender is the user who triggered a local push.
type LocalSender struct {
	// Login is the local user name.
	Login string `json:"login"`
}

// Sign returns "sha256=<hex HMAC-SHA256 of body keyed by secret>", the value
// of X-Kici-Signature-256.
func Sign(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

func (a *app) triggerLocalCommand() *cobra.Command {
	var ref, sha string
	cmd := &cobra.Command{
		Use:   "trigger-local <id>",
		Short: "Simulate a push to a local source and deliver it to the orchestrator",
		Long: `Simulate a push to a local source: resolve the ref and commit in the source's
repository (on this host), build a push payload, sign it with the source's
webhook secret (HMAC-SHA256) and POST it to /webhook/<org>/generic/<name>.

--ref defaults to the checked-out branch; --sha defaults to the commit the ref
points at; "before" is the commit's first parent (40 zeros for a root commit),
so path-filtered triggers see the files that commit changed. Prints the
delivery id; find its runs with 'kici-admin runs list --delivery-id <id>'.`,
		Example: `  kici-admin source trigger-local <source-id>
  kici-admin source trigger-local <source-id> --ref main
  kici-admin source trigger-local <source-id> --ref refs/tags/v1.0.0 --sha 3f2a9c1`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			src, _, err := a.getSource(cmd, args[0])
			if err != nil {
				return err
			}
			if src.ProviderType != apitypes.ProviderLocal || src.LocalConfig == nil {
				return fmt.Errorf("source %s is a %s source: trigger-local needs a local source", src.ID, src.ProviderType)
			}
			if !src.Enabled {
				// The webhook would refuse it (404 "source is disabled").
				return fmt.Errorf("source %s is disabled, so its webhook refuses deliveries: resume it with 'kici-admin source enable %s'", src.ID, src.ID)
			}
			secret, _, err := a.getSourceSecret(cmd, src.ID)
			if err != nil {
				return err
			}
			payload, err := buildLocalPush(ctx, src, ref, sha)
			if err != nil {
				return err
			}
			body, err := json.Marshal(payload)
			if err != nil {
				return err
			}
			c, err := a.api()
			if err != nil {
				return err
			}
			rawID := uuid.NewString()
			path := "/webhook/" + url.PathEscape(src.OrgID) + "/generic/" + url.PathEscape(src.Name)
			raw, status, err := c.Request(ctx, http.MethodPost, path, nil, body, map[string]string{
				"X-Event-Type":         "push",
				"X-Kici-Delivery":      rawID,
				"X-Kici-Signature-256": Sign(secret, body),
			}, false)
			if err != nil {
				return err
			}
			var resp struct {
				Accepted   bool   `json:"accepted"`
				Duplicate  bool   `json:"duplicate"`
				DeliveryID string `json:"deliveryId"`
			}
			_ = json.Unmarshal(raw, &resp)
			if a.json {
				printJSON(a.out(), raw)
				return nil
			}
			id := resp.DeliveryID
			if id == "" {
				id = src.RoutingKey + ":" + rawID
			}
			w := a.out()
			if a.quiet {
				fmt.Fprintln(w, id)
				return nil
			}
			if resp.Duplicate {
				fmt.Fprintf(w, "Delivery %s was already received (HTTP %d)\n", id, status)
			} else {
				fmt.Fprintf(w, "Delivered push %s %s (before %s) as %s\n", payload.Ref, short(payload.After, 12), short(payload.Before, 12), id)
			}
			fmt.Fprintf(w, "Runs: kici-admin runs list --delivery-id %s\n", id)
			return nil
		},
	}
	cmd.Flags().StringVar(&ref, "ref", "", "branch or tag to report (default: the checked-out branch)")
	cmd.Flags().StringVar(&sha, "sha", "", "commit to build (default: the commit --ref points at)")
	return cmd
}

// buildLocalPush resolves ref/sha in the source's repository and builds the
// push payload.
func buildLocalPush(ctx context.Context, src *apitypes.SourceView, ref, sha string) (*LocalPushPayload, error) {
	repo := src.LocalConfig.Path
	if _, err := git(ctx, repo, "rev-parse", "--git-dir"); err != nil {
		return nil, fmt.Errorf("source path %s is not a git repository on this host: %v", repo, err)
	}
	if ref == "" {
		branch, err := git(ctx, repo, "symbolic-ref", "--short", "-q", "HEAD")
		if err != nil || branch == "" {
			return nil, fmt.Errorf("HEAD of %s is detached (no current branch): pass --ref", repo)
		}
		ref = branch
	}
	fullRef := ref
	if !strings.HasPrefix(ref, "refs/") {
		full, err := git(ctx, repo, "rev-parse", "--symbolic-full-name", ref)
		if err != nil || !strings.HasPrefix(full, "refs/") {
			if sha == "" {
				return nil, fmt.Errorf("--ref %q does not name a branch or tag in %s", ref, repo)
			}
			// A new branch name reported with an explicit --sha.
			full = "refs/heads/" + ref
		}
		fullRef = full
	}
	target := sha
	if target == "" {
		target = fullRef
	}
	after, err := git(ctx, repo, "rev-parse", "--verify", "--quiet", target+"^{commit}")
	if err != nil || after == "" {
		return nil, fmt.Errorf("cannot resolve %q to a commit in %s", target, repo)
	}
	before := ZeroSHA
	if p, err := git(ctx, repo, "rev-parse", "--verify", "--quiet", after+"^1"); err == nil && p != "" {
		before = p
	}
	p := &LocalPushPayload{
		Ref: fullRef, Before: before, After: after,
		Repository: LocalRepository{FullName: src.OrgID + "/" + src.Name, Path: repo},
		Sender:     LocalSender{Login: localUser()},
	}
	if msg, err := git(ctx, repo, "log", "-1", "--format=%B", after); err == nil {
		p.HeadCommit = &LocalCommit{ID: after, Message: strings.TrimRight(msg, "\n")}
		if name, err := git(ctx, repo, "log", "-1", "--format=%an", after); err == nil {
			p.HeadCommit.Author.Name = name
		}
	}
	return p, nil
}

// git runs git -C dir args and returns trimmed stdout.
func git(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0")
	out, err := cmd.Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok && len(ee.Stderr) > 0 {
			return "", fmt.Errorf("git %s: %s", strings.Join(args, " "), strings.TrimSpace(string(ee.Stderr)))
		}
		return "", fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(out)), nil
}

// localUser is the current user's login name.
func localUser() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	return "local"
}
