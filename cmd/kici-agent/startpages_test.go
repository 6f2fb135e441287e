package main

import (
	"testing"
	"time"

	"kici.dev/kici/internal/agent/agenttest"
	"kici.dev/kici/internal/startpages"
	"kici.dev/kici/internal/testutil/wait"
)

// TestStaticAgentReleasesItsStartupPages starts the real binary twice on
// one fake orchestrator: a static agent, which unmaps the pages of its
// binary that start-up touched once it has registered, and a
// scaler-managed one, which does not (it runs its job at once). Idle and
// registered, the static one must map well under half the file pages the
// other keeps.
func TestStaticAgentReleasesItsStartupPages(t *testing.T) {
	srv := agenttest.NewServer(t, agenttest.Options{Token: "kat_test", PendingDispatch: true})
	common := []string{"KICI_ORCHESTRATOR_URL=" + srv.URL, "KICI_AGENT_TOKEN=kat_test"}
	static := startBin(t, append(common, "KICI_AGENT_ID=static-1", "KICI_WORK_DIR="+stepDir(t, 0o711)))
	spawned := startBin(t, append(common, "KICI_AGENT_ID=spawned-1", "KICI_SCALER_MANAGED=true", "KICI_WORK_DIR="+stepDir(t, 0o711)))
	srv.WaitRegistrations(t, 2, 20*time.Second)
	// The release runs right after the register.ack, which the fake
	// orchestrator sends after recording the registration: poll.
	var sFile, pFile, sAnon, pAnon int
	released := wait.Until(10*time.Second, func() bool {
		sFile, sAnon = residentKB(t, static.cmd.Process.Pid)
		pFile, pAnon = residentKB(t, spawned.cmd.Process.Pid)
		return sFile*2 < pFile
	})
	t.Logf("resident file pages: static %d KB, scaler-managed %d KB; anonymous %d KB, %d KB", sFile, pFile, sAnon, pAnon)
	if !released {
		t.Errorf("the static agent maps %d KB of file pages against %d KB for an agent that keeps its start-up pages: want under half", sFile, pFile)
	}
}

// residentKB reads RssFile and RssAnon of pid, KiB.
func residentKB(t *testing.T, pid int) (file, anon int) {
	t.Helper()
	r, err := startpages.ResidentOf(pid)
	if err != nil {
		t.Fatal(err)
	}
	if r.File == 0 {
		t.Fatalf("no RssFile in /proc/%d/status", pid)
	}
	return r.File, r.Anon
}
