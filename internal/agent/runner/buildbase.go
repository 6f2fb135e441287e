package runner

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"

	"github.com/moby/moby/client"
)

// Base images of a Dockerfile-built job container. The image's content
// hash (containerbuild.go) covers the image ID of every `FROM` image as
// the local Engine holds it, so a base image rebuilt or re-pulled under
// the same tag rebuilds the job's image, while an unchanged Dockerfile,
// context and base reuse it.

// fromLine is one FROM instruction: the image reference (build arguments
// not yet substituted) and the stage name it declares ("" without AS).
type fromLine struct {
	image, stage string
}

// dockerfileFroms reads the FROM instructions of a Dockerfile and the
// default values of the ARGs declared before the first FROM (the only
// ones a FROM may use). Line continuations and comments are honoured;
// flags such as --platform are left out.
func dockerfileFroms(r io.Reader) (froms []fromLine, args map[string]string, err error) {
	args = map[string]string{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var logical strings.Builder
	flush := func() {
		line := strings.TrimSpace(logical.String())
		logical.Reset()
		fields := strings.Fields(line)
		if len(fields) < 2 {
			return
		}
		switch strings.ToUpper(fields[0]) {
		case "ARG":
			if len(froms) > 0 {
				return
			}
			for _, a := range fields[1:] {
				name, val, _ := strings.Cut(a, "=")
				args[name] = strings.Trim(val, `"'`)
			}
		case "FROM":
			rest := fields[1:]
			for len(rest) > 0 && strings.HasPrefix(rest[0], "--") {
				rest = rest[1:]
			}
			if len(rest) == 0 {
				return
			}
			f := fromLine{image: rest[0]}
			if len(rest) >= 3 && strings.EqualFold(rest[1], "AS") {
				f.stage = strings.ToLower(rest[2])
			}
			froms = append(froms, f)
		}
	}
	for sc.Scan() {
		line := sc.Text()
		if t := strings.TrimSpace(line); strings.HasPrefix(t, "#") && logical.Len() == 0 {
			continue
		}
		if strings.HasSuffix(strings.TrimRight(line, " \t"), `\`) {
			logical.WriteString(strings.TrimSuffix(strings.TrimRight(line, " \t"), `\`) + " ")
			continue
		}
		logical.WriteString(line)
		flush()
	}
	flush()
	return froms, args, sc.Err()
}

// argRef matches $NAME, ${NAME} and ${NAME:-default} in a FROM image.
var argRef = regexp.MustCompile(`\$(?:\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}|([A-Za-z_][A-Za-z0-9_]*))`)

// baseImageRefs is the sorted, de-duplicated list of external images the
// Dockerfile's stages start from: build arguments substituted (the job's
// args over the Dockerfile's defaults), earlier stages and scratch left
// out.
func baseImageRefs(r io.Reader, buildArgs map[string]string) ([]string, error) {
	froms, defaults, err := dockerfileFroms(r)
	if err != nil {
		return nil, err
	}
	stages := map[string]bool{}
	seen := map[string]bool{}
	var refs []string
	for _, f := range froms {
		img := argRef.ReplaceAllStringFunc(f.image, func(m string) string {
			sub := argRef.FindStringSubmatch(m)
			name := sub[1] + sub[3]
			if v, ok := buildArgs[name]; ok {
				return v
			}
			if v, ok := defaults[name]; ok && v != "" {
				return v
			}
			return sub[2]
		})
		if img != "" && !stages[strings.ToLower(img)] && !strings.EqualFold(img, "scratch") && !seen[img] {
			seen[img] = true
			refs = append(refs, img)
		}
		if f.stage != "" {
			stages[f.stage] = true
		}
	}
	sort.Strings(refs)
	return refs, nil
}

// imageIDFunc returns the local Engine's image ID of a reference.
type imageIDFunc func(ctx context.Context, ref string) (string, error)

// baseImageIDs resolves every base image of the Dockerfile to its image
// ID, as "ref=id" lines for the content hash. A base the Engine does not
// hold yet is pulled first (the build would pull it anyway), so the hash
// of an unchanged build is the same the first and the second time.
func baseImageIDs(ctx context.Context, dockerfile string, buildArgs map[string]string, id imageIDFunc, pull func(ctx context.Context, ref string) error) ([]string, error) {
	f, err := os.Open(dockerfile)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	refs, err := baseImageRefs(f, buildArgs)
	if err != nil {
		return nil, fmt.Errorf("reading the Dockerfile's FROM lines: %w", err)
	}
	out := make([]string, 0, len(refs))
	for _, ref := range refs {
		got, err := id(ctx, ref)
		if err != nil && pull != nil {
			if perr := pull(ctx, ref); perr != nil {
				return nil, fmt.Errorf("base image %s: not on this agent's Docker Engine and not pulled: %w", ref, perr)
			}
			got, err = id(ctx, ref)
		}
		if err != nil {
			return nil, fmt.Errorf("base image %s: %w", ref, err)
		}
		out = append(out, ref+"="+got)
	}
	return out, nil
}

// engineImageID is the imageIDFunc of a Docker Engine.
func engineImageID(cli *client.Client) imageIDFunc {
	return func(ctx context.Context, ref string) (string, error) {
		res, err := cli.ImageInspect(ctx, ref)
		if err != nil {
			return "", err
		}
		return res.ID, nil
	}
}
