package lockfile

import (
	"path"
	"strings"

	"github.com/goccy/go-yaml/ast"
)

// ContainerBuild builds a job container's image from a Dockerfile of the
// repository (KiCI 0.7 `container: {build: …}`) instead of naming one.
// Context is the build context, a directory relative to the repository
// root ("." by default); Dockerfile is the file relative to Context
// ("Dockerfile" by default); Args are --build-arg values. The agent tags
// the image by a hash of the context's files, the Dockerfile and Args,
// so an unchanged build is not built again.
type ContainerBuild struct {
	Context    string            `json:"context"`
	Dockerfile string            `json:"dockerfile"`
	Args       map[string]string `json:"args,omitempty"`
}

// repoRelPath cleans a path that must stay inside the repository: not
// absolute, no "..", returned slash-separated ("." for the root).
func repoRelPath(p string) (string, bool) {
	if p == "" {
		return ".", true
	}
	if strings.HasPrefix(p, "/") || strings.Contains(p, "\\") {
		return "", false
	}
	c := path.Clean(p)
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", false
	}
	return c, true
}

func (f *yfile) containerBuild(n ast.Node, what string) *ContainerBuild {
	entries, ok := f.mapping(n, what)
	if !ok {
		return nil
	}
	f.strict(entries, what, "context", "dockerfile", "args")
	b := &ContainerBuild{Context: ".", Dockerfile: "Dockerfile"}
	for _, e := range entries {
		switch e.key {
		case "context", "dockerfile":
			s, _ := f.nonEmptyStr(e.val, what+" "+e.key)
			clean, ok := repoRelPath(s)
			if !ok {
				f.errorf(e.val, "%s %s: %q must be a relative path inside the repository (no leading / and no ..)", what, e.key, s)
				continue
			}
			if e.key == "context" {
				b.Context = clean
			} else {
				b.Dockerfile = clean
			}
		case "args":
			// Names are checked as environment variable names.
			b.Args = f.envMap(e.val, what+" args")
		}
	}
	return b
}
