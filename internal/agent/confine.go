package agent

import (
	"errors"
	"fmt"
	"os/exec"
	"os/user"
	"strconv"
	"strings"

	"kici.dev/kici/internal/agent/runner"
)

// Step confinement variables (kici additions).
const (
	// EnvStepUser names the identity steps run as when the agent runs as
	// root: an account name or uid[:gid]; "root" keeps steps as root.
	EnvStepUser = "KICI_STEP_USER"
	// EnvAllowUnconfined, when true, lets an agent that cannot confine its
	// steps run untrusted (fork pull request) jobs anyway.
	EnvAllowUnconfined = "KICI_ALLOW_UNCONFINED_STEPS"
	// EnvStepUIDRange is the range ("first-last") a root agent takes each
	// job's own uid from when KICI_STEP_USER is unset
	// (runner.DefaultUIDRange).
	EnvStepUIDRange = "KICI_STEP_UID_RANGE"
)

// DefaultStepUser is the account KICI_STEP_USER=kici-step runs every job's
// steps as, created on demand (without KICI_STEP_USER each job gets a uid
// of its own instead).
const DefaultStepUser = "kici-step"

// fallbackStepID is the numeric identity used when no account can be
// created (e.g. a minimal container image without useradd): a uid no
// account uses, so steps own nothing but their job.
const fallbackStepID = 65532

// Confinement is how an agent keeps its steps away from its host.
type Confinement struct {
	// StepUser is the identity steps run as (nil: the agent's own user, or
	// a uid per job from UIDs).
	StepUser *runner.StepUser
	// UIDs, set on a root agent without KICI_STEP_USER, gives each job a
	// uid of its own.
	UIDs *runner.UIDPool
	// RefuseUntrusted is the reason untrusted jobs are refused ("" when
	// they may run).
	RefuseUntrusted string
	// Summary says, for the start-up log, what a step can and cannot read.
	Summary string
	// Loud is true when Summary is a warning (steps are not confined).
	Loud bool
	// ProbeNoteDir is where a root agent notes that the job sandbox works
	// on this host, so the next agent skips the check (probeSandbox): the
	// agents' shared work directory; "" checks every time.
	ProbeNoteDir string

	allowUnconfined bool // KICI_ALLOW_UNCONFINED_STEPS=true
}

// ResolveConfinement decides the step identity from environ and the
// agent's effective uid. As root, each job's steps run as a uid of the
// job's own from KICI_STEP_UID_RANGE (runner.UIDPool) unless
// KICI_STEP_USER names one identity for all jobs (an account, created with
// useradd or adduser when missing, or uid[:gid]); KICI_STEP_USER=root keeps
// them as root. A malformed range is an error. A root agent without the
// capabilities to act as another user (missingStepUserCaps) keeps steps as
// root with a loud summary, or fails when KICI_STEP_USER asked for a step
// user. As
// any other user, steps run as that user: nothing keeps them from its files,
// so untrusted jobs are refused unless KICI_ALLOW_UNCONFINED_STEPS=true.
// An unknown account name is an error.
func ResolveConfinement(environ []string, euid int) (*Confinement, error) {
	env := map[string]string{}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	allow := false
	switch v := strings.ToLower(strings.TrimSpace(env[EnvAllowUnconfined])); v {
	case "", "false", "0", "no":
	case "true", "1", "yes":
		allow = true
	default:
		return nil, fmt.Errorf("%s: want true or false, got %q", EnvAllowUnconfined, v)
	}
	spec := strings.TrimSpace(env[EnvStepUser])
	c := &Confinement{allowUnconfined: allow}
	unconfined := func(why string) (*Confinement, error) {
		c.Loud = true
		c.Summary = why + ": a step can read every file and /proc entry this user can, including an orchestrator data directory it owns"
		if !allow {
			c.RefuseUntrusted = why + "; set " + EnvAllowUnconfined + "=true to run untrusted jobs here anyway, or run the agent as root (steps then run as an unprivileged user) or in a container"
			c.Summary += "; untrusted (fork pull request) jobs are refused"
		} else {
			c.Summary += "; untrusted jobs run anyway (" + EnvAllowUnconfined + "=true)"
		}
		return c, nil
	}
	if euid != 0 {
		if spec != "" {
			return nil, fmt.Errorf("%s=%s needs an agent running as root (this one runs as uid %d)", EnvStepUser, spec, euid)
		}
		return unconfined(fmt.Sprintf("steps run as the agent's own user (uid %d)", euid))
	}
	if spec == "root" || spec == "0" {
		return unconfined("steps run as root (" + EnvStepUser + "=root)")
	}
	// Root without the capabilities to act as another user (a container
	// or pod that drops them) would fail every job when it hands the work
	// directory over: steps run as root instead, said at start, unless
	// the operator asked for a step user, which is then an error.
	if missing := missingStepUserCaps(); len(missing) > 0 {
		if spec != "" {
			return nil, fmt.Errorf("%s=%s: this agent runs as root without %s, so it cannot run steps as another user; grant them (e.g. the container's default capabilities) or unset %s", EnvStepUser, spec, strings.Join(missing, ", "), EnvStepUser)
		}
		return unconfined("steps run as root: this agent runs as uid 0 without " + strings.Join(missing, ", ") + ", so it cannot give each job a uid of its own")
	}
	if spec == "" {
		r := strings.TrimSpace(env[EnvStepUIDRange])
		if r == "" {
			r = runner.DefaultUIDRange
		}
		pool, err := runner.ParseUIDRange(r)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", EnvStepUIDRange, err)
		}
		c.UIDs = pool
		c.Summary = "each job's steps run as a uid of the job's own (" + EnvStepUIDRange + "=" + pool.String() + "): they cannot read files only root may read (the orchestrator's data directory), root's /proc entries or anything of another job"
		return c, nil
	}
	u, err := stepUser(spec)
	if err != nil {
		return nil, err
	}
	c.StepUser = u
	c.Summary = "steps run as " + u.String() + ": they cannot read files only root may read (the orchestrator's data directory) or root's /proc entries"
	return c, nil
}

// stepUser resolves spec (DefaultStepUser: that account, created on
// demand, else the unused uid 65532).
func stepUser(spec string) (*runner.StepUser, error) {
	if spec == DefaultStepUser {
		u, err := lookupAccount(DefaultStepUser)
		if err == nil {
			return u, nil
		}
		if createAccount(DefaultStepUser) == nil {
			if u, err := lookupAccount(DefaultStepUser); err == nil {
				return u, nil
			}
		}
		if _, err := user.LookupId(strconv.Itoa(fallbackStepID)); err == nil {
			return nil, fmt.Errorf("cannot create the %s account and uid %d is taken; set %s", DefaultStepUser, fallbackStepID, EnvStepUser)
		}
		return &runner.StepUser{UID: fallbackStepID, GID: fallbackStepID}, nil
	}
	if uidStr, gidStr, hasGID := strings.Cut(spec, ":"); isNumber(uidStr) && (!hasGID || isNumber(gidStr)) {
		uid, _ := strconv.ParseUint(uidStr, 10, 32)
		gid := uid
		if hasGID {
			gid, _ = strconv.ParseUint(gidStr, 10, 32)
		}
		if uid == 0 {
			return nil, fmt.Errorf("%s: uid 0 is root; write %s=root to keep steps as root", EnvStepUser, EnvStepUser)
		}
		u := &runner.StepUser{UID: uint32(uid), GID: uint32(gid)}
		if acct, err := user.LookupId(uidStr); err == nil {
			u.Name = acct.Username
		}
		return u, nil
	}
	u, err := lookupAccount(spec)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", EnvStepUser, err)
	}
	return u, nil
}

func isNumber(s string) bool {
	_, err := strconv.ParseUint(s, 10, 32)
	return err == nil
}

// lookupAccount returns the named account's identity; root is refused.
func lookupAccount(name string) (*runner.StepUser, error) {
	acct, err := user.Lookup(name)
	if err != nil {
		return nil, err
	}
	uid, err1 := strconv.ParseUint(acct.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(acct.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("account %s has a non-numeric uid or gid", name)
	}
	if uid == 0 {
		return nil, fmt.Errorf("account %s is uid 0 (root)", name)
	}
	return &runner.StepUser{Name: name, UID: uint32(uid), GID: uint32(gid)}, nil
}

// createAccount adds a system account without a home or login shell, with
// useradd (Debian, Fedora, …) or adduser (BusyBox, Alpine).
func createAccount(name string) error {
	attempts := [][]string{
		{"useradd", "--system", "--user-group", "--no-create-home", "--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin", name},
		{"adduser", "-S", "-D", "-H", "-h", "/nonexistent", "-s", "/sbin/nologin", name},
	}
	var errs []error
	for _, argv := range attempts {
		path, err := exec.LookPath(argv[0])
		if err != nil {
			continue
		}
		out, err := exec.Command(path, argv[1:]...).CombinedOutput()
		if err == nil {
			return nil
		}
		errs = append(errs, fmt.Errorf("%s: %v: %s", argv[0], err, strings.TrimSpace(string(out))))
	}
	if len(errs) == 0 {
		return errors.New("neither useradd nor adduser is available")
	}
	return errors.Join(errs...)
}
