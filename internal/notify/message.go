package notify

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"kici.dev/kici/internal/runs/status"
	"kici.dev/kici/internal/store"
)

// Message is the JSON body of a webhook notification; the Slack text and
// the email are rendered from it.
type Message struct {
	// Event is "run.<outcome>" (run.failed, run.fixed, run.succeeded,
	// run.held, run.test).
	Event   string     `json:"event"`
	Outcome Outcome    `json:"outcome"`
	Run     MessageRun `json:"run"`
	// URL is the run's page (KICI_PUBLIC_URL/ui/runs/{runId}); "" without
	// a public URL.
	URL string `json:"url,omitempty"`
}

// MessageRun is the run a Message is about.
type MessageRun struct {
	ID            string     `json:"runId"`
	OrgID         string     `json:"orgId"`
	SourceID      string     `json:"sourceId,omitempty"`
	WorkflowName  string     `json:"workflowName"`
	Status        status.Run `json:"status"`
	Repo          string     `json:"repoIdentifier,omitempty"`
	Ref           string     `json:"ref,omitempty"`
	Branch        string     `json:"targetBranch,omitempty"`
	SHA           string     `json:"sha,omitempty"`
	TriggeredBy   string     `json:"triggeredBy,omitempty"`
	FailureReason string     `json:"failureReason,omitempty"`
	CompletedAt   *time.Time `json:"completedAt,omitempty"`
}

// NewMessage describes run's outcome; publicURL is KICI_PUBLIC_URL.
func NewMessage(run *store.Run, o Outcome, publicURL string) Message {
	m := Message{Event: "run." + string(o), Outcome: o, Run: MessageRun{ID: run.ID, OrgID: run.OrgID, SourceID: run.SourceID,
		WorkflowName: run.WorkflowName, Status: run.Status, Repo: run.RepoIdentifier, Ref: run.Ref, Branch: run.TargetBranch,
		SHA: run.SHA, TriggeredBy: run.TriggeredBy, FailureReason: run.FailureReason, CompletedAt: run.CompletedAt}}
	if publicURL != "" {
		m.URL = strings.TrimRight(publicURL, "/") + "/ui/runs/" + run.ID
	}
	return m
}

// Summary is the message's one line: "kici: build of org/repo (main) failed".
func (m Message) Summary() string {
	what := map[Outcome]string{OutcomeFailed: "failed", OutcomeFixed: "is fixed", OutcomeSucceeded: "succeeded",
		OutcomeHeld: "is held waiting for approval", OutcomeTest: "test notification"}[m.Outcome]
	where := m.Run.Repo
	if m.Run.Branch != "" {
		where += " (" + m.Run.Branch + ")"
	}
	return fmt.Sprintf("kici: %s of %s %s", m.Run.WorkflowName, strings.TrimSpace(where), what)
}

// Text is the message as plain text (Slack text and email body).
func (m Message) Text() string {
	var b strings.Builder
	b.WriteString(m.Summary())
	fmt.Fprintf(&b, "\nrun %s", m.Run.ID)
	if m.Run.SHA != "" {
		fmt.Fprintf(&b, " at %s", m.Run.SHA)
	}
	if m.Run.FailureReason != "" {
		fmt.Fprintf(&b, "\n%s", m.Run.FailureReason)
	}
	if m.URL != "" {
		fmt.Fprintf(&b, "\n%s", m.URL)
	}
	return b.String()
}

func decodeMessage(b []byte) (Message, error) {
	var m Message
	err := json.Unmarshal(b, &m)
	return m, err
}
