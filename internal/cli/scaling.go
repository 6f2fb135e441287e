package cli

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"kici.dev/kici/internal/api/apitypes"
	"kici.dev/kici/internal/cluster"
)

// clusterSettingsView is the API answer of the cluster-settings routes.
type clusterSettingsView struct {
	Settings  map[string]*int64 `json:"settings"`
	Effective map[string]int64  `json:"effective"`
	Defaults  map[string]int64  `json:"defaults"`
	Version   int64             `json:"version"`
}

func (a *app) clusterSettingsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cluster-settings",
		Short: "Show and change the live cluster settings",
		Long: `Cluster settings are knobs that take effect without a restart (within the
settings cache TTL, 10 s by default, at once on the orchestrator that took the
change). Names are the API's camelCase names (agentTokenTtlMs) or the column
names (agent_token_ttl_ms).`,
		Example: `  kici-admin cluster-settings show
  kici-admin cluster-settings set agentTokenTtlMs 600000
  kici-admin cluster-settings reset agentTokenTtlMs`,
	}
	show := &cobra.Command{
		Use:     "show",
		Short:   "Print every knob: override, effective value and default",
		Example: "  kici-admin cluster-settings show\n  kici-admin cluster-settings show --json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.api()
			if err != nil {
				return err
			}
			var v clusterSettingsView
			raw, err := c.Get(cmd.Context(), apitypes.AdminPrefix+"/cluster-settings", nil, &v)
			if err != nil {
				return err
			}
			return a.printClusterSettings(raw, &v)
		},
	}
	set := &cobra.Command{
		Use:     "set <knob> <value>",
		Short:   "Override a knob (an integer within its bounds)",
		Example: "  kici-admin cluster-settings set agentTokenTtlMs 600000\n  kici-admin cluster-settings set scaler_spawn_timeout_ms 120000",
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			k, ok := cluster.KnobByName(args[0])
			if !ok {
				return fmt.Errorf("unknown setting %q (known: %s)", args[0], knobList())
			}
			n, err := strconv.ParseInt(args[1], 10, 64)
			if err != nil {
				return fmt.Errorf("%s: value must be an integer, got %q", k.Wire, args[1])
			}
			return a.patchClusterSettings(cmd, map[string]any{k.Wire: n})
		},
	}
	reset := &cobra.Command{
		Use:     "reset <knob>...",
		Short:   "Remove overrides: the knobs return to their defaults",
		Example: "  kici-admin cluster-settings reset agentTokenTtlMs\n  kici-admin cluster-settings reset agentTokenTtlMs queueTimeoutMs",
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			body := map[string]any{}
			for _, name := range args {
				k, ok := cluster.KnobByName(name)
				if !ok {
					return fmt.Errorf("unknown setting %q (known: %s)", name, knobList())
				}
				body[k.Wire] = nil
			}
			return a.patchClusterSettings(cmd, body)
		},
	}
	cmd.AddCommand(show, set, reset)
	return cmd
}

func knobList() string {
	var n []string
	for _, k := range cluster.Knobs {
		n = append(n, k.Wire)
	}
	return strings.Join(n, ", ")
}

func (a *app) patchClusterSettings(cmd *cobra.Command, body map[string]any) error {
	c, err := a.api()
	if err != nil {
		return err
	}
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	raw, _, err := c.Request(cmd.Context(), http.MethodPatch, apitypes.AdminPrefix+"/cluster-settings", nil, b, map[string]string{"Content-Type": "application/json"}, true)
	if err != nil {
		return err
	}
	var v clusterSettingsView
	if err := json.Unmarshal(raw, &v); err != nil {
		return fmt.Errorf("decoding response of PATCH cluster-settings: %w", err)
	}
	return a.printClusterSettings(raw, &v)
}

func (a *app) printClusterSettings(raw []byte, v *clusterSettingsView) error {
	if a.json {
		printJSON(a.out(), raw)
		return nil
	}
	t := newTable(a.out(), "SETTING", "OVERRIDE", "EFFECTIVE", "DEFAULT")
	for _, k := range cluster.Knobs {
		over := "-"
		if p := v.Settings[k.Wire]; p != nil {
			over = strconv.FormatInt(*p, 10)
		}
		t.row(k.Wire, over, strconv.FormatInt(v.Effective[k.Wire], 10), strconv.FormatInt(v.Defaults[k.Wire], 10))
	}
	t.flush()
	fmt.Fprintf(a.out(), "version %d\n", v.Version)
	return nil
}

// scalerStatus is GET /api/v1/admin/scalers' answer.
type scalerStatus = apitypes.ScalersView

func (a *app) scalerCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "scaler",
		Short:   "Inspect the auto-scaler",
		Example: "  kici-admin scaler list\n  kici-admin scaler list --agents",
	}
	var agents bool
	list := &cobra.Command{
		Use:     "list",
		Short:   "List the scalers: state, VM acceleration and boot time, caps, agents alive/spawning/queued, counters",
		Example: "  kici-admin scaler list\n  kici-admin scaler list --agents\n  kici-admin scaler list --json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var v scalerStatus
			if done, err := a.callJSON(cmd, http.MethodGet, apitypes.AdminPrefix+"/scalers", nil, nil, &v); done || err != nil {
				return err
			}
			var degraded []string
			var notes []string
			t := newTable(a.out(), "NAME", "TYPE", "STATE", "ACCEL", "BOOT", "AGENTS", "SPAWNING", "QUEUED", "MAX AGENTS", "MAX SPAWNING", "SPAWNED", "FAILED", "REFUSED", "LABEL SETS")
			for _, s := range v.Scalers {
				state := s.State
				if state == "" { // an orchestrator older than the state field
					state = "active"
					if s.Retiring {
						state = "retiring"
					}
				}
				if s.StateReason != "" {
					degraded = append(degraded, fmt.Sprintf("%s %s: %s", s.Name, state, s.StateReason))
				}
				accel, boot := "-", "-"
				if s.Accel != "" {
					accel = s.Accel
				}
				if s.BootMs > 0 {
					boot = (time.Duration(s.BootMs) * time.Millisecond).String()
				}
				if s.Accel == "tcg" {
					notes = append(notes, fmt.Sprintf("%s: VMs run under software emulation (TCG), boot %s: KVM is not usable: %s", s.Name, boot, s.AccelNote))
				}
				var sets []string
				for _, ls := range s.LabelSets {
					sets = append(sets, "["+strings.Join(ls, ",")+"]")
				}
				t.row(s.Name, s.Type, state, accel, boot, strconv.Itoa(s.Active), strconv.Itoa(s.Spawning), strconv.Itoa(s.Queued),
					strconv.Itoa(s.MaxAgents), strconv.Itoa(s.MaxConcurrentSpawns), strconv.FormatInt(s.SpawnedTotal, 10),
					strconv.FormatInt(s.FailedTotal, 10), strconv.FormatInt(s.RefusedTotal, 10), strings.Join(sets, " "))
			}
			t.flush()
			for _, d := range append(degraded, notes...) {
				fmt.Fprintln(a.out(), d)
			}
			fmt.Fprintf(a.out(), "global: %d/%d agents, %d reloads\n", v.Active, v.GlobalMaxAgents, v.Reloads)
			if agents {
				at := newTable(a.out(), "SCALER", "AGENT", "STATE", "JOB")
				for _, s := range v.Scalers {
					sort.Slice(s.Agents, func(i, j int) bool { return s.Agents[i].AgentID < s.Agents[j].AgentID })
					for _, ag := range s.Agents {
						at.row(s.Name, ag.AgentID, ag.State, ag.JobID)
					}
				}
				at.flush()
			}
			return nil
		},
	}
	list.Flags().BoolVar(&agents, "agents", false, "also list each scaler's agents")
	cmd.AddCommand(list)
	return cmd
}
