package lockfile

import "github.com/goccy/go-yaml/ast"

// gitCredentials parses a job's `gitCredentials: "<scope>:<key>"`
// (KiCI 0.7): the secret a job's git commands authenticate with over
// HTTP(S), e.g. to push a tag or a branch. The agent hands it to git
// through a credential helper (not as an environment variable of the
// steps) and masks it in logs. The value is "<user>:<token>", or a token
// alone (user x-access-token, GitHub's convention).
func (f *yfile) gitCredentials(j *Job, n ast.Node, what string) {
	s, ok := f.nonEmptyStr(n, what)
	if !ok {
		return
	}
	if !ValidSecretRef(s) {
		f.errorf(n, "%s: %q is not a secret reference \"<scope>:<key>\" (e.g. ci/release:push-token)", what, s)
		return
	}
	j.GitCredentials = s
}
