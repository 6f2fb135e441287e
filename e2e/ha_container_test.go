//go:build ha

package e2e

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"kici.dev/kici/internal/testutil/pgtest"
	"kici.dev/kici/internal/testutil/wait"
)

// The container form of the HA acceptance tests (make test-ha): three
// orchestrators from the image of `make image` on a private Docker
// network, the test's PostgreSQL and GitHub fake reached through the
// network's gateway (all traffic stays on this host), one node cut off the
// network mid-run and reconnected.

// forwardTCP listens on listenIP (a free port) and copies every connection
// to and from target, until the test ends; it returns the listening
// address. It lets containers reach the loopback-only PostgreSQL and fake.
func forwardTCP(t *testing.T, listenIP, target string) string {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(listenIP, "0"))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, in, out)
			mu.Unlock()
			go func() { io.Copy(out, in); out.Close() }()
			go func() { io.Copy(in, out); in.Close() }()
		}
	}()
	return ln.Addr().String()
}

// containerNode is one orchestrator container.
type containerNode struct {
	name string
	ip   string
}

// Three orchestrator containers on one PostgreSQL: a steady stream of
// webhooks and an @every 5s schedule; node 2 (not the scheduler's leader)
// is cut off its network for 25 s and reconnected. Every accepted delivery
// makes exactly one run, every job runs once and succeeds, every schedule
// instant fires once, and the cut node starts no job while it cannot
// reach the database (it cannot renew its node heartbeat or claim).
func TestHAContainersNetworkCutLosesNothing(t *testing.T) {
	image := buildOrchestratorImage(t)
	netName := fmt.Sprintf("kici-ha-%d", os.Getpid())
	docker(t, "network", "create", netName)
	t.Cleanup(func() { _ = exec.Command("docker", "network", "rm", netName).Run() })
	gateway := docker(t, "network", "inspect", "--format", "{{(index .IPAM.Config 0).Gateway}}", netName)

	// Job marks go to a host directory mounted into every container.
	c := newHAFixture(t, "/marks")
	c.clusterHarness = &clusterHarness{} // nodes are containers, added below
	pg, err := url.Parse(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	pg.Host = forwardTCP(t, gateway, pg.Host)
	fakeURL, _ := url.Parse(c.fake.URL)
	fakeAddr := forwardTCP(t, gateway, fakeURL.Host)
	token := "kadm_e2e_ha_" + strconv.FormatInt(time.Now().UnixNano(), 36)

	var nodes []containerNode
	for i := 0; i < 3; i++ {
		name := fmt.Sprintf("%s-node%d", netName, i)
		docker(t, "run", "-d", "--name", name, "--hostname", name, "--network", netName,
			"-v", c.marks+":/marks",
			"-e", "KICI_DATABASE_URL="+pg.String(), "-e", "KICI_SECRET_KEY="+haSecretKey,
			"-e", "KICI_BOOTSTRAP_ADMIN_TOKEN="+token, "-e", "KICI_MAX_AGENTS=3",
			image)
		t.Cleanup(func() {
			if t.Failed() {
				out, _ := exec.Command("docker", "logs", "--tail", "300", name).CombinedOutput()
				t.Logf("%s log:\n%s", name, out)
			}
			_ = exec.Command("docker", "rm", "-f", name).Run()
		})
		n := containerNode{name: name, ip: docker(t, "inspect", "--format", "{{(index .NetworkSettings.Networks \""+netName+"\").IPAddress}}", name)}
		nodes = append(nodes, n)
		o := &orchestrator{url: "http://" + n.ip + ":4000", token: token,
			env: []string{"KICI_ADMIN_URL=http://" + n.ip + ":4000", "KICI_ADMIN_TOKEN=" + token}}
		c.Nodes = append(c.Nodes, o)
		wait.For(t, 60*time.Second, name+" to answer /health", func() bool {
			resp, err := http.Get(o.url + "/health")
			if err == nil {
				resp.Body.Close()
			}
			return err == nil && resp.StatusCode == 200
		})
		if i == 0 { // node 0 leads the scheduler: it is up first
			wait.For(t, 30*time.Second, "node 0 to lead the scheduler", func() bool {
				out, _ := exec.Command("docker", "logs", name).CombinedOutput()
				return strings.Contains(string(out), "scheduler: leading")
			})
		}
	}
	c.addSource(t, "http://"+fakeAddr)

	first, code := c.push(0, fmt.Sprintf("ctr-first-%d", time.Now().UnixNano()))
	if code != http.StatusAccepted {
		t.Fatalf("first webhook: HTTP %d", code)
	}
	waitInstants(t, c.Nodes[0], 2)
	stream := c.startStream(500 * time.Millisecond)
	wait.Elapse(t.Context(), 5*time.Second) // traffic before the cut

	stream.setDown(2, true)
	cutAt := time.Now()
	docker(t, "network", "disconnect", netName, nodes[2].name)
	wait.Elapse(t.Context(), 25*time.Second) // the node stays cut off past its lease
	docker(t, "network", "connect", netName, nodes[2].name)
	backAt := time.Now()
	nodes[2].ip = docker(t, "inspect", "--format", "{{(index .NetworkSettings.Networks \""+netName+"\").IPAddress}}", nodes[2].name)
	c.Nodes[2].url = "http://" + nodes[2].ip + ":4000"
	wait.For(t, 60*time.Second, "node 2 to answer again", func() bool {
		resp, err := http.Get(c.Nodes[2].url + "/ready")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == 200
	})
	stream.setDown(2, false)
	wait.Elapse(t.Context(), 5*time.Second) // traffic after the node is back
	deliveries := append(stream.finish(), first)
	waitNextInstant(t, c.Nodes[1])
	runs, statuses := c.checkDeliveries(t, c.Nodes[1], c.Nodes[0], deliveries, 5*time.Minute, false)
	// The cut node started no job while cut off (a few seconds' margin for
	// a job it handed to its agent just before the cut).
	for _, e := range c.executionLines(t) {
		if e.host == nodes[2].name && e.at > cutAt.Unix()+3 && e.at < backAt.Unix() {
			t.Errorf("job %s started on the cut node at %d (cut %d–%d)", e.jobID, e.at, cutAt.Unix(), backAt.Unix())
		}
	}
	got, missed := scheduleInstants(t, c.Nodes[1])
	if !checkInstants(t, got, missed, 5) {
		logScheduleEvents(t, c.Nodes[1])
	}
	c.checkLogsThroughEveryNode(t, runs)
	t.Logf("network cut of node 2 for %s: %d deliveries accepted, run statuses %v; schedule instants %v",
		backAt.Sub(cutAt).Round(time.Second), len(deliveries), statuses, got)
}
