package runner

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"kici.dev/kici/internal/agent/logstream"
)

// A job's `gitCredentials` secret reaches git through a credential helper
// (gitcredentials(7)), not through the steps' environment: the agent
// writes the credential to a file of the job's own (mode 0600, in its
// work directory, owned by its uid) and a helper script that prints it,
// and the steps' environment names only the helper (GIT_CONFIG_COUNT /
// GIT_CONFIG_KEY_0=credential.helper). Git asks the helper when an
// HTTP(S) remote asks for authentication. The credential and its token are
// masked in every log line.

// gitCredentialDir is the job-private directory of the helper.
const gitCredentialDir = "git-credential"

// DefaultGitUser is the user name of a gitCredentials secret holding only
// a token (GitHub's convention for tokens; Gitea and GitLab accept any
// name with a token).
const DefaultGitUser = "x-access-token"

// gitCredential splits a secret value "<user>:<token>" or "<token>".
func gitCredential(v string) (user, token string) {
	v = strings.TrimSpace(v)
	if u, t, ok := strings.Cut(v, ":"); ok && u != "" && t != "" && !strings.ContainsAny(u, "/@ ") {
		return u, t
	}
	return DefaultGitUser, v
}

// setupGitCredentials writes the helper of the job's gitCredentials; a
// job without them is left alone. A secret the job was not given fails
// the job before its first step, saying why.
func (j *job) setupGitCredentials(log *logstream.Stream) error {
	ref := j.cfg.GitCredentials
	if ref == "" {
		return nil
	}
	v, ok := j.d.Secrets[ref]
	if !ok || strings.TrimSpace(v) == "" {
		return fmt.Errorf("gitCredentials: secret %s is not available to this job (does it exist, and does a context the job names bind its scope?)", ref)
	}
	user, token := gitCredential(v)
	if strings.ContainsAny(user+token, "\n\r\x00") {
		return fmt.Errorf("gitCredentials: secret %s holds a line break; it must be <user>:<token> or a token", ref)
	}
	dir := filepath.Join(j.workDir, gitCredentialDir)
	if err := os.Mkdir(dir, 0o700); err != nil {
		return fmt.Errorf("gitCredentials: %w", err)
	}
	creds := filepath.Join(dir, "credential")
	helper := filepath.Join(dir, "helper")
	if err := os.WriteFile(creds, []byte("username="+user+"\npassword="+token+"\n"), 0o600); err != nil {
		return fmt.Errorf("gitCredentials: %w", err)
	}
	script := "#!/bin/sh\n# kici gitCredentials: answers git's \"get\" with the job's credential.\n[ \"$1\" = get ] && exec cat '" + creds + "'\nexit 0\n"
	if err := os.WriteFile(helper, []byte(script), 0o700); err != nil {
		return fmt.Errorf("gitCredentials: %w", err)
	}
	if err := j.handOver(dir, creds, helper); err != nil {
		return fmt.Errorf("gitCredentials: %w", err)
	}
	log.AddLine("", "Git credentials of "+ref+" available to git through a credential helper (user "+user+")")
	return nil
}

// gitCredentialEnv adds the helper to a step's agent-chosen variables
// when the job has gitCredentials.
func (j *job) gitCredentialEnv(extra map[string]string) map[string]string {
	if j.cfg.GitCredentials == "" {
		return extra
	}
	extra["GIT_CONFIG_COUNT"] = "1"
	extra["GIT_CONFIG_KEY_0"] = "credential.helper"
	extra["GIT_CONFIG_VALUE_0"] = filepath.Join(j.workDir, gitCredentialDir, "helper")
	return extra
}

// gitCredentialMasks are the token of the job's gitCredentials, masked
// besides the whole secret value.
func (j *job) gitCredentialMasks() []string {
	if v, ok := j.d.Secrets[j.cfg.GitCredentials]; ok && j.cfg.GitCredentials != "" {
		_, token := gitCredential(v)
		return []string{token}
	}
	return nil
}
