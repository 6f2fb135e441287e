package agent

import (
	"os"
	"path/filepath"
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

// writeToken writes content to a file of mode 0400 (as a Secret volume's
// files are) and returns its path.
func writeToken(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(p, []byte(content), 0o400); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadConfigTokenFromFile(t *testing.T) {
	url := "KICI_ORCHESTRATOR_URL=ws://127.0.0.1:1/ws"
	// A Secret volume's key is a symbolic link into a ..data directory:
	// the link is followed to the regular file.
	dir := t.TempDir()
	real := writeToken(t, "kat_from_secret\n")
	link := filepath.Join(dir, "token")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{real, link, writeToken(t, "kat_from_secret")} {
		c, err := LoadConfig([]string{url, "KICI_AGENT_TOKEN_FILE=" + path})
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if c.Token != "kat_from_secret" {
			t.Fatalf("%s: Token = %q, want kat_from_secret", path, c.Token)
		}
	}
}

func TestLoadConfigTokenFileErrors(t *testing.T) {
	url := "KICI_ORCHESTRATOR_URL=ws://127.0.0.1:1/ws"
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	good := writeToken(t, "kat_ok\n")
	cases := map[string]struct {
		env  []string
		want string
	}{
		"empty":             {[]string{url, "KICI_AGENT_TOKEN_FILE=" + writeToken(t, "")}, "is empty"},
		"only a newline":    {[]string{url, "KICI_AGENT_TOKEN_FILE=" + writeToken(t, "\n")}, "is empty"},
		"over 4 KiB":        {[]string{url, "KICI_AGENT_TOKEN_FILE=" + writeToken(t, strings.Repeat("k", maxTokenBytes+1))}, "more than 4096"},
		"two lines":         {[]string{url, "KICI_AGENT_TOKEN_FILE=" + writeToken(t, "kat_a\nkat_b\n")}, "not one line"},
		"directory":         {[]string{url, "KICI_AGENT_TOKEN_FILE=" + t.TempDir()}, "not a regular file"},
		"fifo":              {[]string{url, "KICI_AGENT_TOKEN_FILE=" + fifo}, "not a regular file"},
		"missing":           {[]string{url, "KICI_AGENT_TOKEN_FILE=/nonexistent/kici/token"}, "no such file"},
		"with the plain":    {[]string{url, "KICI_AGENT_TOKEN=kat_x", "KICI_AGENT_TOKEN_FILE=" + good}, "set only one"},
		"with a descriptor": {[]string{url, "KICI_AGENT_TOKEN_FD=" + strconv.Itoa(tokenFD(t, "kat_y")), "KICI_AGENT_TOKEN_FILE=" + good}, "set only one"},
	}
	for name, tc := range cases {
		c, err := LoadConfig(tc.env)
		if err == nil || !strings.Contains(err.Error(), "KICI_AGENT_TOKEN") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: config %+v err %v, want a KICI_AGENT_TOKEN error with %q", name, c, err, tc.want)
		}
	}
}

// KICI_AGENT_JOB_CONTAINER accepts only "pod"; anything else stops the
// agent at start rather than running container jobs some other way.
func TestLoadConfigJobContainer(t *testing.T) {
	url := "KICI_ORCHESTRATOR_URL=ws://127.0.0.1:1/ws"
	c, err := LoadConfig([]string{url, EnvJobContainer + "=pod"})
	if err != nil || !c.InPod {
		t.Fatalf("pod: config %+v err %v", c, err)
	}
	c, err = LoadConfig([]string{url})
	if err != nil || c.InPod {
		t.Fatalf("unset: config %+v err %v", c, err)
	}
	for _, v := range []string{"docker", "Pod", "true"} {
		if _, err := LoadConfig([]string{url, EnvJobContainer + "=" + v}); err == nil || !strings.Contains(err.Error(), EnvJobContainer) {
			t.Errorf("%q: err %v, want a %s error", v, err, EnvJobContainer)
		}
	}
}
