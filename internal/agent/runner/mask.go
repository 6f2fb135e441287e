package runner

import (
	"encoding/base64"
	"strings"
)

// maskValues lists every value the job's logs must never show: the
// checkout credential (also as user:secret and its basic-auth base64), the
// job's resolved secrets, the agent's own credentials, the attestation
// channel's token once it exists, and every kici-issued credential the
// orchestrator put in the job's variables (isCredentialVar). The Masker adds
// each value's encoded forms.
func (j *job) maskValues() []string {
	var out []string
	d := j.d
	if a := d.SourceAuth; a != nil {
		out = append(out, a.Secret, a.User+":"+a.Secret, base64.StdEncoding.EncodeToString([]byte(a.User+":"+a.Secret)))
	}
	for _, v := range d.Secrets {
		out = append(out, v)
	}
	out = append(out, j.gitCredentialMasks()...)
	out = append(out, j.r.opts.Credentials...)
	if d.JobCredential != "" {
		out = append(out, d.JobCredential)
	}
	if j.attest != nil {
		out = append(out, j.attest.token)
	}
	for k, v := range d.Env {
		if isCredentialVar(k) {
			out = append(out, v)
		}
	}
	return out
}

// isCredentialVar reports whether a KICI_* job variable carries a
// credential kici issued (a token, secret, password or key), which is masked
// even though the job may read it.
func isCredentialVar(name string) bool {
	if !strings.HasPrefix(name, "KICI_") {
		return false
	}
	for _, suffix := range []string{"_TOKEN", "_SECRET", "_PASSWORD", "_KEY"} {
		if strings.HasSuffix(name, suffix) {
			return true
		}
	}
	return false
}
