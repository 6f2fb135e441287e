package main

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"kici.dev/kici/internal/lockfile"
	"kici.dev/kici/internal/scaler/scalerconfig"
	"kici.dev/kici/internal/trigger"
)

// routeFlags say who could serve the jobs `kici preview` shows: the
// orchestrator's scaler configuration and the label sets of static agents.
type routeFlags struct {
	scalers string
	labels  []string
}

func (rf *routeFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&rf.scalers, "scalers", os.Getenv("KICI_SCALER_CONFIG_PATH"), "the orchestrator's scalers.yaml, to flag jobs no scaler can serve (default $KICI_SCALER_CONFIG_PATH, else the embedded default's `local` scaler)")
	f.StringArrayVar(&rf.labels, "labels", nil, "the labels of one static agent, comma-separated (repeat the flag per agent)")
}

// unroutable returns one warning per job of a matched workflow whose
// runsOn (exact labels; excludeLabels too) no scaler label set and no
// --labels agent serves: dispatch would mark it `unroutable:` and fail it
// once KICI_UNROUTABLE_GRACE_MS has passed. The scaler configuration is
// loaded like the orchestrator loads it (scalerconfig.LoadConfig, with
// KICI_SCALER_CONFIG_DIR or scalers.d next to the file).
func (rf *routeFlags) unroutable(lf *lockfile.LockFile, ds []trigger.Decision) ([]string, error) {
	cfg, err := scalerconfig.LoadConfig(rf.scalers, os.Getenv("KICI_SCALER_CONFIG_DIR"), 0)
	if err != nil {
		return nil, fmt.Errorf("--scalers: %w", err)
	}
	where := "the embedded default (the `local` scaler, labels [local])"
	if rf.scalers != "" {
		where = rel(rf.scalers)
	}
	agents := make([][]string, len(rf.labels))
	for i, s := range rf.labels {
		for _, l := range strings.Split(s, ",") {
			if l = strings.ToLower(strings.TrimSpace(l)); l != "" {
				agents[i] = append(agents[i], l)
			}
		}
	}
	var out []string
	for i, wf := range lf.Workflows {
		if i >= len(ds) || !ds[i].Matched {
			continue
		}
		for _, j := range wf.Jobs {
			runsOn, exclude := exactLabels(j.RunsOn), exactLabels(j.ExcludeLabels)
			if cfg.Serves(runsOn, exclude) || slices.ContainsFunc(agents, func(a []string) bool { return agentServes(a, runsOn, exclude) }) {
				continue
			}
			agentNote := "no --labels"
			if len(agents) > 0 {
				agentNote = "no --labels agent"
			}
			out = append(out, fmt.Sprintf("%s: job %s: runsOn [%s] matches no scaler label set in %s (and %s): it would fail as unroutable after KICI_UNROUTABLE_GRACE_MS (default 10 min)",
				wf.Name, j.Name, strings.Join(runsOn, " "), where, agentNote))
		}
	}
	return out, nil
}

// exactLabels are the lower-cased values of the exact matchers (the only
// kind dispatch routes on).
func exactLabels(ms []lockfile.LabelMatcher) []string {
	out := []string{}
	for _, m := range ms {
		if m.Kind == lockfile.MatcherExact {
			out = append(out, strings.ToLower(m.Value))
		}
	}
	return out
}

// agentServes is dispatch's labelsMatch for a static agent's labels.
func agentServes(agent, runsOn, exclude []string) bool {
	for _, l := range runsOn {
		if !slices.Contains(agent, l) {
			return false
		}
	}
	return !slices.ContainsFunc(exclude, func(l string) bool { return slices.Contains(agent, l) })
}
