package lockfile

// IsOrgWide reports whether wf is an organization-wide workflow: one of its
// triggers filters on `repos` (as in KiCI, where any trigger with repos
// makes the workflow "global"). Such a workflow also runs for the other sources of
// its org that the filter selects, once the cluster setting
// global_workflows_enabled is 1.
func IsOrgWide(wf *Workflow) bool {
	for _, t := range wf.Triggers {
		if len(t.Repos) > 0 {
			return true
		}
	}
	return false
}
