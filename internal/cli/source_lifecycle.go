package cli

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	"kici.dev/kici/internal/api/apitypes"
)

// terminalPrompt writes question to w and reads one answer line from the
// terminal on stdin; ok is false (and nothing is written) when stdin is not
// a terminal, so a script never blocks on a prompt it cannot see. A
// variable so tests can stand in for a terminal.
var terminalPrompt = func(w io.Writer, question string) (answer string, ok bool, err error) {
	if !term.IsTerminal(int(os.Stdin.Fd())) {
		return "", false, nil
	}
	fmt.Fprint(w, question)
	line, err := bufio.NewReader(os.Stdin).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", true, err
	}
	return strings.TrimSpace(line), true, nil
}

// confirm asks a yes/no question on the terminal (default no). Without a
// terminal it refuses, naming the flag that skips the question.
func (a *app) confirm(question, yesFlag string) error {
	answer, ok, err := terminalPrompt(a.io.Stderr, question+" [y/N]: ")
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("stdin is not a terminal, so there is no one to confirm: pass %s to go ahead", yesFlag)
	}
	switch strings.ToLower(answer) {
	case "y", "yes":
		return nil
	}
	return errors.New("cancelled: nothing was changed")
}

func (a *app) sourceDeleteCommand() *cobra.Command {
	var yes bool
	cmd := &cobra.Command{
		Use:   "delete <id>",
		Short: "Remove a source with its settings, webhook secrets and registrations",
		Long: `Remove a source of any kind (local, generic, universal-git, GitHub). Its
settings, webhook secrets and registrations go with it, so its schedules and
event triggers stop and its webhook answers 404; runs, deliveries and the event
log are kept. This cannot be undone: to stop a source for a while, use
'kici-admin source disable' instead.

On a terminal the command asks first; --yes skips the question (required when
stdin is not a terminal).`,
		Example: `  kici-admin source delete 1b4e28ba-2fa1-11d2-883f-0016d3cca427
  kici-admin source delete 1b4e28ba-2fa1-11d2-883f-0016d3cca427 --yes`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			src, _, err := a.getSource(cmd, args[0])
			if err != nil {
				return err
			}
			if !yes {
				q := fmt.Sprintf("Delete %s source %q (org %q, id %s) with its settings, webhook secrets and registrations?",
					src.ProviderType, src.Name, src.OrgID, src.ID)
				if err := a.confirm(q, "--yes"); err != nil {
					return err
				}
			}
			if printed, err := a.callJSON(cmd, http.MethodDelete, apitypes.AdminPrefix+"/generic-sources/"+url.PathEscape(src.ID), nil, nil, nil); printed || err != nil {
				return err
			}
			if a.quiet {
				fmt.Fprintln(a.out(), src.ID)
				return nil
			}
			fmt.Fprintf(a.out(), "Deleted %s source %q (%s). Its runs, deliveries and event log are kept.\n", src.ProviderType, src.Name, src.ID)
			return nil
		},
	}
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "delete without asking")
	return cmd
}

// sourceToggleCommand is `source enable` (on) or `source disable`.
func (a *app) sourceToggleCommand(on bool) *cobra.Command {
	verb, short, example := "disable", "Pause a source: its webhook refuses deliveries and its triggers do not fire",
		"  kici-admin source disable 1b4e28ba-2fa1-11d2-883f-0016d3cca427"
	if on {
		verb, short, example = "enable", "Resume a paused source", "  kici-admin source enable 1b4e28ba-2fa1-11d2-883f-0016d3cca427"
	}
	return &cobra.Command{
		Use:   verb + " <id>",
		Short: short,
		Long: `Pause or resume a source. A disabled source keeps its settings, secrets and
registrations, but its webhook answers 404 "source is disabled" (the sender
sees it; the refusal is listed by 'kici-admin event-log rejected') and its
schedules and event triggers start nothing. Enabling it again does not fire the
schedules that fell due meanwhile. Both are idempotent.`,
		Example: example,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var resp struct {
				Enabled bool `json:"enabled"`
			}
			path := apitypes.AdminPrefix + "/generic-sources/" + url.PathEscape(args[0]) + "/" + verb
			if printed, err := a.callJSON(cmd, http.MethodPost, path, nil, nil, &resp); printed || err != nil {
				return err
			}
			if a.quiet {
				fmt.Fprintln(a.out(), args[0])
				return nil
			}
			state := "disabled: its webhook refuses deliveries and its triggers do not fire"
			if resp.Enabled {
				state = "enabled"
			}
			fmt.Fprintf(a.out(), "Source %s is %s\n", args[0], state)
			return nil
		},
	}
}

// sourceOrgWideCommand is `source org-wide-workflows <id> allow|deny`.
func (a *app) sourceOrgWideCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "org-wide-workflows <id> allow|deny",
		Short: "Allow or deny the org's organization-wide workflows for one source",
		Long: `Choose whether the organization-wide workflows of the other sources of the
source's org (workflows with ` + "`repos`" + ` on a trigger, run when the cluster setting
globalWorkflowsEnabled is 1) run for this source's pushes and pull requests.
allow is the default; deny keeps every one of them away from the source, and
its delivery traces say so. Only an org-wide admin token may change it, not a
token scoped to the source.`,
		Example: `  kici-admin source org-wide-workflows 1b4e28ba-2fa1-11d2-883f-0016d3cca427 deny`,
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			mode := args[1]
			if mode != "allow" && mode != "deny" {
				return fmt.Errorf("%q: say allow or deny", mode)
			}
			var resp apitypes.SourceOrgWideWorkflows
			path := apitypes.AdminPrefix + "/generic-sources/" + url.PathEscape(args[0]) + "/org-wide-workflows"
			if printed, err := a.callJSON(cmd, http.MethodPut, path, nil, apitypes.SourceOrgWideWorkflows{OrgWideWorkflows: mode}, &resp); printed || err != nil {
				return err
			}
			if a.quiet {
				fmt.Fprintln(a.out(), resp.OrgWideWorkflows)
				return nil
			}
			fmt.Fprintf(a.out(), "Organization-wide workflows: %s for source %s\n", resp.OrgWideWorkflows, args[0])
			return nil
		},
	}
}
