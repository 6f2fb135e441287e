package agent

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// tokenFD returns a descriptor (a dup the test does not own any more) of a
// pipe holding content and closed for writing.
func tokenFD(t *testing.T, content string) int {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteString(content); err != nil {
		t.Fatal(err)
	}
	w.Close()
	fd, err := syscall.Dup(int(r.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	return fd
}

func TestLoadConfigTokenFromFD(t *testing.T) {
	fd := tokenFD(t, "kat_from_pipe\n")
	c, err := LoadConfig([]string{"KICI_ORCHESTRATOR_URL=ws://127.0.0.1:1/ws", "KICI_AGENT_TOKEN_FD=" + strconv.Itoa(fd)})
	if err != nil {
		t.Fatal(err)
	}
	if c.Token != "kat_from_pipe" {
		t.Fatalf("Token = %q, want kat_from_pipe", c.Token)
	}
	// The descriptor is closed after the read.
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != syscall.EBADF {
		t.Errorf("descriptor %d still open after LoadConfig (fstat err %v)", fd, err)
	}
}

func TestLoadConfigTokenFDErrors(t *testing.T) {
	url := "KICI_ORCHESTRATOR_URL=ws://127.0.0.1:1/ws"
	cases := map[string][]string{
		"both set":    {url, "KICI_AGENT_TOKEN=kat_x", "KICI_AGENT_TOKEN_FD=" + strconv.Itoa(tokenFD(t, "kat_y"))},
		"stdin":       {url, "KICI_AGENT_TOKEN_FD=0"},
		"not numeric": {url, "KICI_AGENT_TOKEN_FD=three"},
		"closed":      {url, "KICI_AGENT_TOKEN_FD=987654"},
		"empty pipe":  {url, "KICI_AGENT_TOKEN_FD=" + strconv.Itoa(tokenFD(t, " \n"))},
		"too long":    {url, "KICI_AGENT_TOKEN_FD=" + strconv.Itoa(tokenFD(t, strings.Repeat("k", maxTokenBytes+1)))},
	}
	for name, env := range cases {
		c, err := LoadConfig(env)
		if err == nil || !strings.Contains(err.Error(), "KICI_AGENT_TOKEN") {
			t.Errorf("%s: config %+v err %v, want a KICI_AGENT_TOKEN error", name, c, err)
		}
	}
	// The plain variable still works for manually started agents.
	c, err := LoadConfig([]string{url, "KICI_AGENT_TOKEN= kat_plain "})
	if err != nil || c.Token != "kat_plain" {
		t.Fatalf("KICI_AGENT_TOKEN: token %q err %v", c.Token, err)
	}
}
