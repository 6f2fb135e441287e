// Package fcapitest is a fake Firecracker VMM for tests: an HTTP server on
// a unix socket implementing the endpoints fcapi uses with the Firecracker
// validation rules the scaler relies on, recording every call. FakeJailer
// turns a process into a stand-in for `jailer … -- firecracker …`.
package fcapitest

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Call is one API request the fake received.
type Call struct {
	Method string          `json:"method"`
	Path   string          `json:"path"`
	Body   json.RawMessage `json:"body,omitempty"`
	Status int             `json:"status"`
}

// VMM is the fake. Root is the directory guest paths resolve against (the
// jail's root); Hang makes every request block until its client gives up
// (a VMM that never answers).
type VMM struct {
	Root string
	Hang bool
	// OnCall, if set, is called after each answered call.
	OnCall func(Call)
	// OnCtrlAltDel, if set, runs after SendCtrlAltDel was answered (the
	// guest shuts down).
	OnCtrlAltDel func()

	mu      sync.Mutex
	calls   []Call
	started bool
	boot    bool
	ifaces  map[string]bool
	rootDev string
	srv     *http.Server
	ln      net.Listener
}

// Serve listens on socket and serves until Close.
func (v *VMM) Serve(socket string) error {
	ln, err := net.Listen("unix", socket)
	if err != nil {
		return err
	}
	v.ln = ln
	v.ifaces = map[string]bool{}
	v.srv = &http.Server{Handler: v}
	go func() { _ = v.srv.Serve(ln) }()
	return nil
}

// Close stops the server.
func (v *VMM) Close() { _ = v.srv.Close() }

// Calls returns the calls so far.
func (v *VMM) Calls() []Call {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]Call(nil), v.calls...)
}

func fault(w http.ResponseWriter, status int, msg string) int {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"fault_message": msg})
	return status
}

// ServeHTTP implements the API.
func (v *VMM) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if v.Hang {
		<-r.Context().Done()
		return
	}
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	v.mu.Lock()
	status, after := v.handle(w, r.Method, r.URL.Path, body)
	c := Call{Method: r.Method, Path: r.URL.Path, Status: status}
	if len(body) > 0 {
		c.Body = json.RawMessage(body)
	}
	v.calls = append(v.calls, c)
	v.mu.Unlock()
	if v.OnCall != nil {
		v.OnCall(c)
	}
	if after != nil {
		after()
	}
}

func (v *VMM) exists(p string) bool {
	if !filepath.IsAbs(p) {
		return false
	}
	_, err := os.Stat(filepath.Join(v.Root, filepath.Clean(p)))
	return err == nil
}

const afterStart = "The requested operation is not supported after starting the microVM."

func (v *VMM) handle(w http.ResponseWriter, method, path string, body []byte) (int, func()) {
	if method == http.MethodGet && path == "/" {
		state := "Not started"
		if v.started {
			state = "Running"
		}
		w.WriteHeader(http.StatusOK)
		_ = json.NewEncoder(w).Encode(map[string]string{"id": "anonymous-instance", "state": state})
		return http.StatusOK, nil
	}
	if method != http.MethodPut {
		return fault(w, http.StatusBadRequest, "Invalid request method"), nil
	}
	var obj map[string]any
	if err := json.Unmarshal(body, &obj); err != nil {
		return fault(w, http.StatusBadRequest, "An error occurred when deserializing the json body of a request: "+err.Error()), nil
	}
	str := func(k string) string { s, _ := obj[k].(string); return s }
	preBoot := func() bool { return !v.started }
	switch {
	case path == "/machine-config":
		if !preBoot() {
			return fault(w, http.StatusBadRequest, afterStart), nil
		}
		vc, _ := obj["vcpu_count"].(float64)
		mem, _ := obj["mem_size_mib"].(float64)
		if vc < 1 || vc > 32 || vc != float64(int(vc)) {
			return fault(w, http.StatusBadRequest, "The vCPU number is invalid! The vCPU number can only be 1 or an even number when SMT is enabled."), nil
		}
		if mem < 1 {
			return fault(w, http.StatusBadRequest, "The memory size (MiB) is invalid."), nil
		}
	case path == "/boot-source":
		if !preBoot() {
			return fault(w, http.StatusBadRequest, afterStart), nil
		}
		if !v.exists(str("kernel_image_path")) {
			return fault(w, http.StatusBadRequest, "The kernel file cannot be opened: No such file or directory (os error 2)"), nil
		}
		v.boot = true
	case strings.HasPrefix(path, "/drives/"):
		if !preBoot() {
			return fault(w, http.StatusBadRequest, afterStart), nil
		}
		id := strings.TrimPrefix(path, "/drives/")
		if str("drive_id") != id {
			return fault(w, http.StatusBadRequest, "The id from the path does not match the id from the body!"), nil
		}
		if !v.exists(str("path_on_host")) {
			return fault(w, http.StatusBadRequest, "Unable to create the block device: BackingFile(Os { code: 2, kind: NotFound, message: \"No such file or directory\" })"), nil
		}
		if root, _ := obj["is_root_device"].(bool); root {
			if v.rootDev != "" && v.rootDev != id {
				return fault(w, http.StatusBadRequest, "A root block device already exists!"), nil
			}
			v.rootDev = id
		}
	case strings.HasPrefix(path, "/network-interfaces/"):
		if !preBoot() {
			return fault(w, http.StatusBadRequest, afterStart), nil
		}
		id := strings.TrimPrefix(path, "/network-interfaces/")
		if str("iface_id") != id {
			return fault(w, http.StatusBadRequest, "The id from the path does not match the id from the body!"), nil
		}
		if str("host_dev_name") == "" {
			return fault(w, http.StatusBadRequest, "Could not create the network device: Open tap device failed"), nil
		}
		v.ifaces[id] = true
	case path == "/mmds/config":
		if !preBoot() {
			return fault(w, http.StatusBadRequest, afterStart), nil
		}
		list, _ := obj["network_interfaces"].([]any)
		if len(list) == 0 {
			return fault(w, http.StatusBadRequest, "The list of network interface IDs that allow forwarding MMDS requests is empty."), nil
		}
		for _, x := range list {
			if s, _ := x.(string); !v.ifaces[s] {
				return fault(w, http.StatusBadRequest, "The list of network interface IDs provided contains at least one ID that does not correspond to any existing network interface."), nil
			}
		}
	case path == "/mmds":
	case path == "/actions":
		switch str("action_type") {
		case "InstanceStart":
			if v.started {
				return fault(w, http.StatusBadRequest, "The virtual machine is already running."), nil
			}
			if !v.boot {
				return fault(w, http.StatusBadRequest, "Cannot start microvm that was not configured: missing kernel configuration."), nil
			}
			v.started = true
		case "SendCtrlAltDel":
			if !v.started {
				return fault(w, http.StatusBadRequest, "The requested operation is not supported before starting the microVM."), nil
			}
			w.WriteHeader(http.StatusNoContent)
			return http.StatusNoContent, v.OnCtrlAltDel
		default:
			return fault(w, http.StatusBadRequest, "Unknown action type"), nil
		}
	default:
		return fault(w, http.StatusBadRequest, "Invalid request method and/or path: "+method+" "+path), nil
	}
	w.WriteHeader(http.StatusNoContent)
	return http.StatusNoContent, nil
}

// Environment of FakeJailer.
const (
	// EnvMode is "" (normal), "hang" (the API never answers) or
	// "ignore-ctrlaltdel" (the guest does not shut down).
	EnvMode = "KICI_FAKE_FC_MODE"
	// EnvLog is a directory; FakeJailer writes <id>.argv (JSON), <id>.pid
	// and appends each API call to <id>.calls (JSON lines).
	EnvLog = "KICI_FAKE_FC_LOG"
)

// FakeJailer acts like `jailer --id ID --exec-file F --uid U --gid G
// --chroot-base-dir B -- --api-sock S` without jailing: it serves a fake
// VMM on B/<basename F>/ID/root/S with that root for guest paths, exits 0
// after SendCtrlAltDel (the guest shut down) and 143 on SIGTERM. It returns
// the exit code.
func FakeJailer(args []string) int {
	flags := map[string]string{}
	var vmmArgs []string
	for i := 0; i < len(args); i++ {
		if args[i] == "--" {
			vmmArgs = args[i+1:]
			break
		}
		if strings.HasPrefix(args[i], "--") && i+1 < len(args) {
			flags[args[i]] = args[i+1]
			i++
		}
	}
	for _, k := range []string{"--id", "--exec-file", "--uid", "--gid", "--chroot-base-dir"} {
		if flags[k] == "" {
			fmt.Fprintf(os.Stderr, "fake jailer: missing %s\n", k)
			return 2
		}
	}
	sock := "/run/firecracker.socket"
	for i := 0; i+1 < len(vmmArgs); i++ {
		if vmmArgs[i] == "--api-sock" {
			sock = vmmArgs[i+1]
		}
	}
	id := flags["--id"]
	root := filepath.Join(flags["--chroot-base-dir"], filepath.Base(flags["--exec-file"]), id, "root")
	logDir := os.Getenv(EnvLog)
	var logMu sync.Mutex
	if logDir != "" {
		b, _ := json.Marshal(args)
		_ = os.WriteFile(filepath.Join(logDir, id+".argv"), b, 0o644)
		_ = os.WriteFile(filepath.Join(logDir, id+".pid"), []byte(fmt.Sprint(os.Getpid())), 0o644)
	}
	done := make(chan int, 1)
	v := &VMM{Root: root, Hang: os.Getenv(EnvMode) == "hang"}
	v.OnCall = func(c Call) {
		if logDir == "" {
			return
		}
		logMu.Lock()
		defer logMu.Unlock()
		f, err := os.OpenFile(filepath.Join(logDir, id+".calls"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err == nil {
			b, _ := json.Marshal(c)
			_, _ = f.Write(append(b, '\n'))
			f.Close()
		}
	}
	if os.Getenv(EnvMode) != "ignore-ctrlaltdel" {
		// The guest takes a moment to shut down; the answer is sent first.
		v.OnCtrlAltDel = func() { go func() { time.Sleep(50 * time.Millisecond); done <- 0 }() }
	}
	p := filepath.Join(root, filepath.Clean(sock))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "fake jailer:", err)
		return 1
	}
	if err := v.Serve(p); err != nil {
		fmt.Fprintln(os.Stderr, "fake jailer:", err)
		return 1
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	go func() { <-sig; done <- 143 }()
	code := <-done
	v.Close()
	return code
}
