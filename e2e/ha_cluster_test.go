package e2e

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"kici.dev/kici/internal/testutil/ghfake"
	"kici.dev/kici/internal/testutil/wait"
)

// The high-availability acceptance tests (docs/high-availability.md):
// several real orchestrators on one throwaway PostgreSQL database, a GitHub
// App source served by the recording fake, webhooks spread across the nodes.
// `make test` runs the short form; `make test-ha` sets
// KICI_TEST_HA_WEBHOOKS=100 and adds the container form (build tag ha).

// haLogLines is how many numbered lines each work job prints.
const haLogLines = 40

// haWorkflow is the cluster tests' repository: a push workflow whose one
// job appends "<job id> <hostname> <unix seconds>" to marks/jobs (to count
// executions, and see where and when each ran) and prints
// haLogLines numbered lines, and an @every 5s schedule whose job asks for
// a label no agent has, so its fires cost no agent.
func haWorkflow(marks string) (work, tick string) {
	work = `name: hawork
on: {push: {branches: [main]}}
jobs:
  work:
    checkout: false
    steps:
      - shell: sh
        run: |
          umask 0; echo "$KICI_JOB_ID $(hostname) $(date +%s)" >> ` + marks + `/jobs
          i=1
          while [ $i -le ` + strconv.Itoa(haLogLines) + ` ]; do echo "line $i of $KICI_RUN_ID"; i=$((i+1)); done
`
	tick = `name: hatick
on:
  schedule:
    cron: "@every 5s"
jobs:
  tick:
    runsOn: [e2e-ha-nowhere]
    steps:
      - run: echo tick
`
	return work, tick
}

// haCluster is the cluster harness's nodes (one PostgreSQL database, one
// master key, fixed ports so a restarted node comes back at the same
// address) with a GitHub App source whose repository is a local git
// repository served through the fake's API.
type haCluster struct {
	*clusterHarness
	fake  *ghfake.Server
	repo  string
	sha   string
	srcID string
	marks string
}

// startHACluster starts n nodes with extraEnv (plus the shared key).
func startHACluster(t *testing.T, n int, extraEnv ...string) *haCluster {
	t.Helper()
	c := newHAFixture(t, "")
	c.clusterHarness = startClusterHarness(t, n, append([]string{"KICI_SECRET_KEY=" + haSecretKey, loopbackSourcesEnv}, extraEnv...)...)
	c.addSource(t, c.fake.URL)
	return c
}

// haSecretKey is the master key every node of a test cluster shares.
var haSecretKey = strings.Repeat("5a", 32)

// newHAFixture makes the repository (its job writes to jobMarks, the host
// marks directory when empty) and serves its lock through the fake.
func newHAFixture(t *testing.T, jobMarks string) *haCluster {
	t.Helper()
	c := &haCluster{marks: marksDir(t)}
	if jobMarks == "" {
		jobMarks = c.marks
	}
	work, tick := haWorkflow(jobMarks)
	c.repo = t.TempDir()
	git(t, c.repo, "init", "-q", "-b", "main")
	write(t, filepath.Join(c.repo, ".kici/workflows/work.yaml"), work)
	write(t, filepath.Join(c.repo, ".kici/workflows/tick.yaml"), tick)
	run(t, c.repo, nil, filepath.Join(binDir, "kici"), "compile")
	git(t, c.repo, "add", "-A")
	git(t, c.repo, "commit", "-qm", "ha fixture")
	c.sha = git(t, c.repo, "rev-parse", "HEAD")
	lock, err := os.ReadFile(filepath.Join(c.repo, ".kici/kici.lock.json"))
	if err != nil {
		t.Fatal(err)
	}
	c.fake = ghfake.New(ingressApp)
	t.Cleanup(c.fake.Close)
	c.fake.SetFile(ingressRepo, c.sha, ".kici/kici.lock.json", lock)
	c.fake.SetFile(ingressRepo, "main", ".kici/kici.lock.json", lock)
	c.fake.SetInstallation(ingressRepo, 7)
	return c
}

// addSource registers the GitHub App source through node 0, its API at
// apiURL (the fake, as the nodes reach it).
func (c *haCluster) addSource(t *testing.T, apiURL string) {
	t.Helper()
	keyFile := filepath.Join(t.TempDir(), "app.pem")
	write(t, keyFile, c.fake.PrivateKeyPEM)
	c.srcID = c.Nodes[0].admin(t, "-q", "source", "add", "github", "--org", "acme", "--name", "gh", "--app-id", fmt.Sprint(ingressApp),
		"--private-key", "@"+keyFile, "--api-url", apiURL, "--webhook-secret", ingressSecret)
}

// push posts a signed push of HEAD to node i with delivery id delivery and
// returns the id of the delivery's run and the HTTP status (0 when the node
// did not answer). Safe from any goroutine: it fails nothing itself.
func (c *haCluster) push(i int, delivery string) (runDelivery string, status int) {
	body := fmt.Appendf(nil, `{"ref":"refs/heads/main","before":"0000000000000000000000000000000000000000","after":%q,`+
		`"installation":{"id":7},"sender":{"login":"dev","id":1001},`+
		`"repository":{"full_name":%q,"default_branch":"main","clone_url":"file://%s"}}`, c.sha, ingressRepo, c.repo)
	mac := hmac.New(sha256.New, []byte(ingressSecret))
	mac.Write(body)
	req, _ := http.NewRequest("POST", c.Nodes[i].url+"/webhook/acme/github/"+c.srcID, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "push")
	req.Header.Set("X-GitHub-Delivery", delivery)
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	client := http.Client{Timeout: 10 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		return "", 0
	}
	resp.Body.Close()
	return fmt.Sprintf("github:%d:%s", ingressApp, delivery), resp.StatusCode
}

// executions counts how many times each job id ran its step.
func (c *haCluster) executions(t *testing.T) map[string]int {
	t.Helper()
	n := map[string]int{}
	for _, e := range c.executionLines(t) {
		n[e.jobID]++
	}
	return n
}

// execution is one line of marks/jobs.
type execution struct {
	jobID, host string
	at          int64
}

func (c *haCluster) executionLines(t *testing.T) []execution {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(c.marks, "jobs"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []execution
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := append(strings.Fields(line), "", "")
		if f[0] == "" {
			continue
		}
		at, _ := strconv.ParseInt(f[2], 10, 64)
		out = append(out, execution{jobID: f[0], host: f[1], at: at})
	}
	return out
}

// haRun is one delivery's run as seen through the cluster.
type haRun struct {
	delivery string
	runID    string
	status   string
	jobID    string
}

// settle waits until each delivery has a terminal run, through node via,
// and fails the test if a delivery made other than one run.
func (c *haCluster) settle(t *testing.T, via *orchestrator, deliveries []string, timeout time.Duration) []haRun {
	t.Helper()
	var out []haRun
	deadline := time.Now().Add(timeout)
	for _, d := range deliveries {
		var list struct {
			Runs []runView `json:"runs"`
		}
		if !wait.Until(time.Until(deadline), func() bool {
			via.get(t, "/api/v1/admin/runs?deliveryId="+d, &list)
			if len(list.Runs) > 1 {
				t.Fatalf("delivery %s made %d runs, want 1", d, len(list.Runs))
			}
			return len(list.Runs) == 1 && terminalRun(list.Runs[0].Status)
		}) {
			t.Fatalf("delivery %s: runs %+v after %s, want one terminal run", d, list.Runs, timeout)
		}
		r := haRun{delivery: d, runID: list.Runs[0].RunID, status: list.Runs[0].Status}
		r.jobID = via.jobsOf(t, r.runID)["work"].JobID
		out = append(out, r)
	}
	return out
}

func terminalRun(s string) bool {
	return s == "success" || s == "failed" || s == "cancelled"
}

// workflowRuns counts the runs of a workflow through node o.
func workflowRuns(t *testing.T, o *orchestrator, workflow string) int {
	t.Helper()
	var c struct {
		Total int `json:"total"`
	}
	o.get(t, "/api/v1/admin/runs?count=true&workflowName="+workflow, &c)
	return c.Total
}

// checkLogsThroughEveryNode reads each successful run's step log through
// every node: all haLogLines lines, in order, once.
func (c *haCluster) checkLogsThroughEveryNode(t *testing.T, runs []haRun) {
	t.Helper()
	for _, r := range runs {
		if r.status != "success" {
			continue
		}
		for i, o := range c.Nodes {
			got := o.readLog(t, r.runID, r.jobID, 0)
			if err := checkSequence(got, haLogLines, func(k int) string { return fmt.Sprintf("line %d of %s", k+1, r.runID) }); err != nil {
				t.Errorf("run %s read through node %d: %v", r.runID, i, err)
			}
		}
	}
}
