package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"kici.dev/kici/internal/api/apitypes"
	"kici.dev/kici/internal/cli/termsafe"
)

func (a *app) runsStartCommand() *cobra.Command {
	var source, workflow, ref, repo string
	var inputs []string
	var follow bool
	cmd := &cobra.Command{
		Use:   "start --source <id> --workflow <name>",
		Short: "Start a workflow by hand (its dispatch trigger), with typed inputs",
		Long: `Start a run of a workflow that declares a dispatch trigger, at a ref (a
branch, tag, full ref or commit SHA; a branch wins over a tag of the same
name), reading the lock at that commit. Local sources default to the
repository's HEAD. GitHub sources need --repo owner/repo; the ref is
resolved through the GitHub API and defaults to the repository's default
branch (an App source finds its installation on the repository itself).
Generic sources need --repo and a full commit SHA. A ref that names no
branch, tag or commit is refused naming it (HTTP 404). Each --input name=value
is typed and checked by the orchestrator against the trigger's declared
inputs (string, number, integer, boolean, choice/enum; required; default):
an unknown, missing required or mistyped input is refused with its name
(HTTP 400). Jobs see the inputs as KICI_INPUT_<NAME> and in if: conditions
as inputs.<name>.

--follow streams the run's logs and then exits like "runs wait": 0 when the
run succeeded, 1 otherwise.`,
		Example: `  kici-admin runs start --source <id> --workflow deploy --input target=staging
  kici-admin runs start --source <id> --workflow release --ref v1.2.0 --input dry=false --follow
  kici-admin runs start --source <id> --workflow ci --ref main --quiet   # print only the run id
  kici-admin runs start --source <github-id> --repo acme/api --workflow deploy --ref release/2.x --input target=prod`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if source == "" || workflow == "" {
				return fmt.Errorf("--source and --workflow are required")
			}
			req := apitypes.ManualRunRequest{SourceID: source, Workflow: workflow, Ref: ref, Repo: repo}
			for _, in := range inputs {
				k, v, ok := strings.Cut(in, "=")
				if !ok || k == "" {
					return fmt.Errorf("--input %q: expected name=value", in)
				}
				if req.Inputs == nil {
					req.Inputs = map[string]any{}
				}
				req.Inputs[k] = v
			}
			c, err := a.api()
			if err != nil {
				return err
			}
			var resp struct {
				Run apitypes.RunView `json:"run"`
			}
			raw, err := c.Post(cmd.Context(), apitypes.AdminPrefix+"/runs", req, &resp)
			if err != nil {
				return err
			}
			switch {
			case a.json && !follow:
				printJSON(a.out(), raw)
			case a.quiet:
				fmt.Fprintln(a.out(), resp.Run.RunID)
			default:
				fmt.Fprintf(a.out(), "run %s started (%s at %s)\n", resp.Run.RunID, termsafe.Cell(resp.Run.WorkflowName), resp.Run.SHA)
			}
			if !follow {
				return nil
			}
			logs := a.runsLogsCommand()
			logs.SetArgs([]string{resp.Run.RunID, "--follow"})
			logs.SetOut(a.out())
			if err := logs.ExecuteContext(cmd.Context()); err != nil {
				return err
			}
			wait := a.runsWaitCommand()
			wait.SetArgs([]string{resp.Run.RunID})
			wait.SetOut(a.out())
			return wait.ExecuteContext(cmd.Context())
		},
	}
	f := cmd.Flags()
	f.StringVar(&source, "source", "", "source id (required)")
	f.StringVar(&workflow, "workflow", "", "workflow name (required)")
	f.StringVar(&ref, "ref", "", "branch, tag, full ref or commit SHA (default: the repository's HEAD)")
	f.StringVar(&repo, "repo", "", "owner/repo, for sources other than local ones")
	f.StringArrayVar(&inputs, "input", nil, "an input, name=value (repeatable)")
	f.BoolVar(&follow, "follow", false, "stream the run's logs, then exit 0 if it succeeded, 1 otherwise")
	return cmd
}
