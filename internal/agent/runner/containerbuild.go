package runner

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/moby/moby/client"

	"kici.dev/kici/internal/agent/logstream"
	"kici.dev/kici/internal/lockfile"
	"kici.dev/kici/internal/protocol"
	"kici.dev/kici/internal/runs/status"
)

// Images built from a Dockerfile of the repository (`container: {build:
// …}`). The image is tagged BuildImageRepo:<content hash>, the hash
// covering every file of the context (path, mode, content; .git left
// out), the Dockerfile's path, the build arguments and the image ID of
// every base (FROM) image on the Engine (buildbase.go): a job whose
// Dockerfile, context and base images did not change finds its image on
// the Engine and is not built again.

// BuildImageRepo is the repository name of images built for jobs.
const BuildImageRepo = "kici-build"

// LabelBuildHash is the image label holding the content hash.
const LabelBuildHash = "kici-build-hash"

// buildStep runs buildImage as the job's step "Build container image"
// (protocol.ContainerBuildStepIndex): its own log and its own running,
// then success or failed, status with the build's duration, so the build
// output is a step of the job and not part of the setup log.
func (j *job) buildStep(cli *client.Client, b *lockfile.ContainerBuild) (string, error) {
	start := time.Now()
	log := j.newStream(protocol.ContainerBuildStepIndex)
	defer log.Close()
	send := func(state status.Step, data *protocol.StepStatusData) {
		msg := &protocol.StepStatus{Type: protocol.TypeStepStatus, RunID: j.d.RunID, JobID: j.d.JobID,
			StepIndex: protocol.ContainerBuildStepIndex, StepName: protocol.ContainerBuildStepName,
			State: state, Timestamp: now(), Data: data}
		if state != status.StepRunning {
			msg.LogBytesStreamed = log.BytesStreamed()
		}
		j.r.out.Send(msg)
	}
	send(status.StepRunning, nil)
	tag, err := j.buildImage(j.ctx, cli, b, log)
	state, errMsg := status.StepSuccess, ""
	if err != nil {
		state, errMsg = status.StepFailed, j.masker.Mask(err.Error())
		log.AddLine("", "Error: "+errMsg)
	}
	log.Close()
	send(state, &protocol.StepStatusData{DurationMs: time.Since(start).Milliseconds(), Error: errMsg})
	return tag, err
}

// buildImage builds (or finds) the image of b from the job's checkout and
// returns its tag. The build's output goes to log line by line.
func (j *job) buildImage(ctx context.Context, cli *client.Client, b *lockfile.ContainerBuild, log *logstream.Stream) (string, error) {
	ctxDir, dockerfile, err := buildPaths(j.srcDir, b)
	if err != nil {
		return "", err
	}
	pull := func(ctx context.Context, ref string) error {
		log.AddLine("", "Pulling base image "+ref)
		rc, err := cli.ImagePull(ctx, ref, client.ImagePullOptions{})
		if err != nil {
			return err
		}
		defer rc.Close()
		_, err = io.Copy(io.Discard, rc)
		return err
	}
	bases, err := baseImageIDs(ctx, filepath.Join(ctxDir, filepath.FromSlash(dockerfile)), b.Args, engineImageID(cli), pull) // buildbase.go
	if err != nil {
		return "", fmt.Errorf("container build: %w", err)
	}
	for _, base := range bases {
		ref, id, _ := strings.Cut(base, "=")
		log.AddLine("", fmt.Sprintf("Base image %s is %s", ref, id))
	}
	sum, err := contextHash(ctxDir, b, bases)
	if err != nil {
		return "", fmt.Errorf("container build: %w", err)
	}
	tag := BuildImageRepo + ":" + sum[:32]
	if _, err := cli.ImageInspect(ctx, tag); err == nil {
		log.AddLine("", fmt.Sprintf("Container image %s is up to date (context %s, %s and base images unchanged): not rebuilt", tag, b.Context, dockerfile))
		return tag, nil
	}
	log.AddLine("", fmt.Sprintf("Building container image %s from %s (context %s)", tag, dockerfile, b.Context))
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeContextTar(pw, ctxDir)) }()
	args := map[string]*string{}
	for k, v := range b.Args {
		args[k] = &v
	}
	res, err := cli.ImageBuild(ctx, pr, client.ImageBuildOptions{Tags: []string{tag}, Dockerfile: dockerfile, BuildArgs: args,
		Remove: true, ForceRemove: true, Labels: map[string]string{LabelBuildHash: sum, LabelJobManaged: "build"}})
	if err != nil {
		pr.CloseWithError(err)
		return "", fmt.Errorf("container build: %w", err)
	}
	defer res.Body.Close()
	dec := json.NewDecoder(res.Body)
	for {
		var m struct {
			Stream string `json:"stream"`
			Status string `json:"status"`
			Error  string `json:"error"`
		}
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return "", fmt.Errorf("container build: reading the Engine's answer: %w", err)
		}
		for _, line := range strings.Split(strings.TrimRight(m.Stream+m.Status, "\n"), "\n") {
			if strings.TrimSpace(line) != "" {
				log.AddLine("", "build: "+line)
			}
		}
		if m.Error != "" {
			return "", fmt.Errorf("container build failed: %s", m.Error)
		}
	}
	if _, err := cli.ImageInspect(ctx, tag); err != nil {
		return "", fmt.Errorf("container build: image %s missing after the build: %w", tag, err)
	}
	log.AddLine("", "Built container image "+tag)
	return tag, nil
}

// buildPaths resolves b's context in the checkout (following symlinks,
// which must stay inside it) and the Dockerfile's slash path inside the
// context (the Engine reads it from the context archive).
func buildPaths(srcDir string, b *lockfile.ContainerBuild) (ctxDir, dockerfile string, err error) {
	root, err := filepath.EvalSymlinks(srcDir)
	if err != nil {
		return "", "", fmt.Errorf("container build: checkout: %w", err)
	}
	ctxDir, err = filepath.EvalSymlinks(filepath.Join(root, filepath.FromSlash(b.Context)))
	if err != nil {
		return "", "", fmt.Errorf("container build: context %q: %w", b.Context, err)
	}
	if !inside(root, ctxDir) {
		return "", "", fmt.Errorf("container build: context %q leaves the repository", b.Context)
	}
	df, err := filepath.EvalSymlinks(filepath.Join(ctxDir, filepath.FromSlash(b.Dockerfile)))
	if err != nil {
		return "", "", fmt.Errorf("container build: dockerfile %q (relative to the context %q): %w", b.Dockerfile, b.Context, err)
	}
	if !inside(ctxDir, df) {
		return "", "", fmt.Errorf("container build: dockerfile %q must be inside the context %q", b.Dockerfile, b.Context)
	}
	rel, _ := filepath.Rel(ctxDir, df)
	return ctxDir, filepath.ToSlash(rel), nil
}

func inside(root, p string) bool {
	rel, err := filepath.Rel(root, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// walkContext calls fn for every entry of dir but .git, in lexical order.
func walkContext(dir string, fn func(rel string, d fs.DirEntry, full string) error) error {
	return filepath.WalkDir(dir, func(full string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, full)
		if rel == "." {
			return nil
		}
		if d.Name() == ".git" {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		return fn(filepath.ToSlash(rel), d, full)
	})
}

// contextHash is the hex SHA-256 of the context's entries, the
// Dockerfile path, the sorted build arguments and the base images
// ("ref=image ID" lines of baseImageIDs, sorted).
func contextHash(dir string, b *lockfile.ContainerBuild, bases []string) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "kici-build v2\ndockerfile %q\n", b.Dockerfile)
	for _, base := range bases {
		fmt.Fprintf(h, "base %q\n", base)
	}
	keys := make([]string, 0, len(b.Args))
	for k := range b.Args {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(h, "arg %q=%q\n", k, b.Args[k])
	}
	err := walkContext(dir, func(rel string, d fs.DirEntry, full string) error {
		return hashEntry(h, rel, d, full)
	})
	return hex.EncodeToString(h.Sum(nil)), err
}

func hashEntry(h hash.Hash, rel string, d fs.DirEntry, full string) error {
	info, err := d.Info()
	if err != nil {
		return err
	}
	switch {
	case d.Type()&fs.ModeSymlink != 0:
		target, err := os.Readlink(full)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "L %q %q\n", rel, target)
	case d.IsDir():
		fmt.Fprintf(h, "D %q %o\n", rel, info.Mode().Perm())
	case info.Mode().IsRegular():
		fmt.Fprintf(h, "F %q %o %d\n", rel, info.Mode().Perm(), info.Size())
		f, err := os.Open(full)
		if err != nil {
			return err
		}
		defer f.Close()
		if _, err := io.Copy(h, f); err != nil {
			return err
		}
	}
	return nil
}

// writeContextTar writes the context as a tar archive (regular files,
// directories and symlinks; .git left out), as the Engine's build API
// takes it.
func writeContextTar(w io.Writer, dir string) error {
	tw := tar.NewWriter(w)
	err := walkContext(dir, func(rel string, d fs.DirEntry, full string) error {
		info, err := d.Info()
		if err != nil {
			return err
		}
		link := ""
		if d.Type()&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(full); err != nil {
				return err
			}
		} else if !d.IsDir() && !info.Mode().IsRegular() {
			return nil // sockets, devices, fifos: not build input
		}
		hdr, err := tar.FileInfoHeader(info, link)
		if err != nil {
			return err
		}
		hdr.Name = rel
		if d.IsDir() {
			hdr.Name += "/"
		}
		hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = 0, 0, "", ""
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if info.Mode().IsRegular() {
			f, err := os.Open(full)
			if err != nil {
				return err
			}
			defer f.Close()
			if _, err := io.Copy(tw, f); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return tw.Close()
}
