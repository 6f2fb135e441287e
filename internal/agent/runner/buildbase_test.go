package runner

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"kici.dev/kici/internal/lockfile"
)

// TestDockerfileBaseImageRefs: every external FROM image, build arguments
// substituted (the job's over the Dockerfile's defaults), earlier stages,
// scratch and flags left out.
func TestDockerfileBaseImageRefs(t *testing.T) {
	df := `# syntax=docker/dockerfile:1
ARG BASE=debian:12
ARG TOOLS
FROM --platform=linux/amd64 ${BASE} AS build
RUN make
FROM build AS test
FROM \
  golang:${GO:-1.22}
FROM scratch
COPY --from=build /out /
FROM $TOOLS
`
	got, err := baseImageRefs(strings.NewReader(df), map[string]string{"TOOLS": "alpine:3"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"alpine:3", "debian:12", "golang:1.22"}; !reflect.DeepEqual(got, want) {
		t.Errorf("bases %v, want %v", got, want)
	}
	got, _ = baseImageRefs(strings.NewReader(df), map[string]string{"BASE": "ubuntu:24.04", "TOOLS": "alpine:3"})
	if want := []string{"alpine:3", "golang:1.22", "ubuntu:24.04"}; !reflect.DeepEqual(got, want) {
		t.Errorf("with BASE overridden: %v, want %v", got, want)
	}
}

// TestContainerBuildHashFollowsBaseImage: the image hash changes when the
// Engine's image behind the FROM tag changes, and stays when it does not;
// a base that had to be pulled first hashes like one already present, so
// the second build of an unchanged Dockerfile is not a rebuild.
func TestContainerBuildHashFollowsBaseImage(t *testing.T) {
	repo := t.TempDir()
	if err := os.WriteFile(filepath.Join(repo, "Dockerfile"), []byte("FROM team/base:1\nRUN true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b := &lockfile.ContainerBuild{Context: ".", Dockerfile: "Dockerfile"}
	engine := map[string]string{"team/base:1": "sha256:aaaa"}
	ids := func(_ context.Context, ref string) (string, error) {
		if id, ok := engine[ref]; ok {
			return id, nil
		}
		return "", errors.New("No such image: " + ref)
	}
	pulled := 0
	pull := func(_ context.Context, ref string) error {
		pulled++
		engine[ref] = "sha256:aaaa"
		return nil
	}
	hash := func() string {
		t.Helper()
		bases, err := baseImageIDs(context.Background(), filepath.Join(repo, "Dockerfile"), b.Args, ids, pull)
		if err != nil {
			t.Fatal(err)
		}
		h, err := contextHash(repo, b, bases)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	h0 := hash()
	if hash() != h0 {
		t.Error("an unchanged Dockerfile, context and base image changed the hash")
	}
	engine["team/base:1"] = "sha256:bbbb" // the base image was rebuilt under its tag
	h1 := hash()
	if h1 == h0 {
		t.Error("a changed base image kept the hash: the job image would not be rebuilt")
	}
	delete(engine, "team/base:1")
	if h := hash(); h != h0 || pulled != 1 {
		t.Errorf("a missing base is pulled once (%d pulls) and then hashes as present (%v)", pulled, h == h0)
	}
	delete(engine, "team/base:1")
	_, err := baseImageIDs(context.Background(), filepath.Join(repo, "Dockerfile"), nil, ids, func(context.Context, string) error {
		return errors.New("registry unreachable")
	})
	if err == nil || !strings.Contains(err.Error(), "team/base:1") || !strings.Contains(err.Error(), "registry unreachable") {
		t.Errorf("a base neither present nor pullable: err = %v, want one naming the image and the cause", err)
	}
}
