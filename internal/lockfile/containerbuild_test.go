package lockfile

import (
	"strings"
	"testing"
)

// TestContainerBuildCompiles: `container: {build: …}` is written into the
// lock with its defaults filled in, and survives the lock's JSON.
func TestContainerBuildCompiles(t *testing.T) {
	src := "name: w\non: {push: {}}\njobs:\n  j:\n    container:\n      build: {context: ci/./image, args: {V: 1}}\n      env: {A: b}\n    run: x\n"
	lock, err := Compile([]SourceFile{{Path: ".kici/workflows/w.yaml", Source: []byte(src)}})
	if err != nil {
		t.Fatal(err)
	}
	c := lock.Workflows[0].Jobs[0].Container
	if c == nil || c.Image != "" || c.Build == nil || c.Build.Context != "ci/image" || c.Build.Dockerfile != "Dockerfile" ||
		c.Build.Args["V"] != "1" || c.Env["A"] != "b" {
		t.Fatalf("container = %+v (build %+v)", c, c.Build)
	}
	src = "name: w\non: {push: {}}\njobs:\n  j:\n    container: {build: {}}\n    run: x\n"
	lock, err = Compile([]SourceFile{{Path: ".kici/workflows/w.yaml", Source: []byte(src)}})
	if err != nil {
		t.Fatal(err)
	}
	if b := lock.Workflows[0].Jobs[0].Container.Build; b.Context != "." || b.Dockerfile != "Dockerfile" {
		t.Errorf("defaults: %+v", b)
	}
}

// TestContainerBuildRefused: paths leaving the repository, both image and
// build, bad argument names and unknown keys are compile errors.
func TestContainerBuildRefused(t *testing.T) {
	for field, want := range map[string]string{
		"container: {build: {context: ../other}}":        "inside the repository",
		"container: {build: {context: /srv/x}}":          "inside the repository",
		"container: {build: {dockerfile: a/../../x}}":    "inside the repository",
		"container: {image: x, build: {}}":               "one of them",
		"container: {build: {args: {'bad-name': 1}}}":    "not a valid environment variable name",
		"container: {build: {context: ., target: prod}}": `unknown key "target"`,
		"container: {env: {A: b}}":                       "needs an image or a build",
	} {
		src := "name: w\non: {push: {}}\njobs:\n  j:\n    " + field + "\n    run: x\n"
		_, err := Compile([]SourceFile{{Path: ".kici/workflows/w.yaml", Source: []byte(src)}})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want %q", field, err, want)
		}
	}
}

// TestGitCredentialsCompile: gitCredentials takes a secret reference and
// lands in the lock; anything else is refused.
func TestGitCredentialsCompile(t *testing.T) {
	src := "name: w\non: {push: {}}\njobs:\n  j:\n    gitCredentials: ci/release:push-token\n    run: x\n"
	lock, err := Compile([]SourceFile{{Path: ".kici/workflows/w.yaml", Source: []byte(src)}})
	if err != nil {
		t.Fatal(err)
	}
	if got := lock.Workflows[0].Jobs[0].GitCredentials; got != "ci/release:push-token" {
		t.Errorf("gitCredentials = %q", got)
	}
	for _, bad := range []string{"token-value", "'../x:y'", "[a]"} {
		src := "name: w\non: {push: {}}\njobs:\n  j:\n    gitCredentials: " + bad + "\n    run: x\n"
		if _, err := Compile([]SourceFile{{Path: ".kici/workflows/w.yaml", Source: []byte(src)}}); err == nil {
			t.Errorf("gitCredentials %s compiled", bad)
		}
	}
}
