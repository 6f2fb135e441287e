package runner

import (
	"fmt"
	"sort"
	"strings"
)

// withSecrets adds the secrets a step may see to its environment: the job's
// declared secrets, overridden by the step's own (name → "<scope>:<key>"),
// with values from the dispatch (keyed by reference). A declared secret the
// orchestrator did not send fails the step, naming the variable and the
// reference but never a value. Existing entries of those names are
// replaced.
func withSecrets(env []string, jobDecl, stepDecl, values map[string]string) ([]string, error) {
	if len(jobDecl) == 0 && len(stepDecl) == 0 {
		return env, nil
	}
	decl := map[string]string{}
	for k, v := range jobDecl {
		decl[k] = v
	}
	for k, v := range stepDecl {
		decl[k] = v
	}
	names := make([]string, 0, len(decl))
	for k := range decl {
		names = append(names, k)
	}
	sort.Strings(names)
	var missing []string
	for _, n := range names {
		if _, ok := values[decl[n]]; !ok {
			missing = append(missing, fmt.Sprintf("%s (%s)", n, decl[n]))
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("secrets not available: %s (not set, or not granted to this job: a context the job names must bind the scope on this agent; the orchestrator log names the withheld references)", strings.Join(missing, ", "))
	}
	out := make([]string, 0, len(env)+len(names))
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if _, shadowed := decl[name]; !shadowed {
			out = append(out, kv)
		}
	}
	for _, n := range names {
		out = append(out, n+"="+values[decl[n]])
	}
	return out, nil
}
