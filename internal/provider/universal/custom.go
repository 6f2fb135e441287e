package universal

import (
	"fmt"

	"kici.dev/kici/internal/provider"
	"kici.dev/kici/internal/provider/github"
	"kici.dev/kici/internal/trigger"
)

// normalizeCustom applies a custom mapping: eventMapping picks the
// normalized type, payloadPaths read the fields (first string node of each
// JSONPath). ref (a full git ref) classifies push/tag like GitHub;
// branch/targetBranch give the target directly; sha is the lock ref.
func normalizeCustom(cfg Config, eventName string, body []byte) (*trigger.Event, provider.LockRef, error) {
	const prov = PresetCustom
	head := provider.LockRef{Ref: provider.HEAD}
	typ, ok := cfg.EventMapping[eventName]
	if !ok {
		return nil, head, provider.Unsupported(prov, eventName, "event is not in the source's eventMapping")
	}
	p, err := provider.DecodeObject(body)
	if err != nil {
		return nil, head, err
	}
	get := func(key string) (string, error) {
		path, ok := cfg.PayloadPaths[key]
		if !ok {
			return "", nil
		}
		jp, err := trigger.CompileJSONPath(path)
		if err != nil {
			return "", err
		}
		for _, n := range trigger.EvalJSONPath(jp, p) {
			switch v := n.(type) {
			case string:
				return v, nil
			case float64:
				return fmt.Sprint(v), nil
			}
		}
		return "", nil
	}
	vals := map[string]string{}
	for _, k := range customPathKeys {
		v, err := get(k)
		if err != nil {
			return nil, head, err
		}
		vals[k] = v
	}
	ev := &trigger.Event{
		Type:           trigger.Kind(typ),
		Action:         vals[PathAction],
		Payload:        p,
		Provider:       prov,
		SourceRepo:     vals[PathRepo],
		SenderUsername: vals[PathSender],
		SourceBranch:   vals[PathSourceBranch],
	}
	ref := head
	switch {
	case vals[PathTargetBranch] != "":
		ev.TargetBranch = vals[PathTargetBranch]
	case vals[PathBranch] != "":
		ev.TargetBranch = vals[PathBranch]
	case vals[PathRef] != "":
		var kind trigger.Kind
		kind, ev.TargetBranch = github.RefKind(vals[PathRef])
		if typ == "push" {
			ev.Type = kind
		}
	}
	if ev.TargetBranch == "" {
		return nil, head, provider.Unsupported(prov, eventName, "the mapped payload has no ref or branch")
	}
	if ev.Type == "tag" {
		ev.Action = ""
	}
	if ev.Type == "pull_request" || ev.Type == "review" || ev.Type == "review_comment" {
		ev.BaseBranch = ev.TargetBranch
		ref.BaseRef = ev.TargetBranch
	}
	if sha := vals[PathSHA]; sha != "" {
		ref.Ref = sha
	}
	return ev, ref, nil
}
