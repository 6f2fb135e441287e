package lockfile

import (
	"regexp"
	"strings"

	"github.com/goccy/go-yaml/ast"
)

// secretRefRe is a secret reference "<scope>:<key>": the scope is path
// segments of [A-Za-z0-9._-] separated by "/", optionally qualified "pg:";
// the key is 1–255 of [A-Za-z0-9._-] (KiCI's key rule; see
// docs/kici-compatibility.md#contexts-and-secrets). ValidSecretRef checks
// the key's length: written as {1,255} in the expression, that bound made
// every start allocate 170 KB to compile it.
var secretRefRe = regexp.MustCompile(`^(pg:)?[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*:[A-Za-z0-9._-]+$`)

// maxSecretKeyLen is the longest key of a secret reference, in bytes.
const maxSecretKeyLen = 255

// ValidSecretRef reports whether ref is a well-formed "<scope>:<key>"
// whose scope has no "." or ".." segment (the secret store refuses those
// scopes, so such a reference could never resolve).
func ValidSecretRef(ref string) bool {
	if len(ref) > 512 || !secretRefRe.MatchString(ref) {
		return false
	}
	colon := strings.LastIndexByte(ref, ':') // the key has no ':'
	if len(ref)-colon-1 > maxSecretKeyLen {
		return false
	}
	scope := strings.TrimPrefix(ref[:colon], "pg:")
	for _, seg := range strings.Split(scope, "/") {
		if seg == "." || seg == ".." {
			return false
		}
	}
	return true
}

// secretMap parses `secrets: {NAME: "<scope>:<key>"}`: names are
// environment variable names, values secret references. Secret values never
// appear in a workflow; only where to find them.
func (f *yfile) secretMap(n ast.Node, what string) map[string]string {
	return f.envVarMap(n, what, func(e kv) (string, bool) {
		v, ok := f.scalar(e.val)
		if !ok || !ValidSecretRef(v) {
			f.errorf(e.val, "%s: %s must name a secret as \"<scope>:<key>\" (e.g. release:npm_token)", what, e.key)
			return "", false
		}
		return v, true
	})
}
