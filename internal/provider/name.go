package provider

// Name is the provider of a source, a run, a delivery or a registration
// (stored as sources.provider_type, runs.provider, event_log.provider), and
// the adapter name of a normalized trigger event. It is a string in JSON
// and in the database; universal-git events carry their preset name
// (gitea, forgejo, gogs, gitlab-repo, github-repo, custom).
type Name string

// Provider names the server itself writes or compares against.
const (
	// GitHub is a GitHub source (App or token) and the events of its
	// webhook route.
	GitHub Name = "github"
	// Generic is a generic-webhook source, also the kind of a universal-git
	// source, and the adapter name of plain generic-webhook events.
	Generic Name = "generic"
	// Local is a repository on the orchestrator's host.
	Local Name = "local"
	// Kici is an event kici raises itself (schedules, lifecycle events,
	// workflow_run, manual runs).
	Kici Name = "kici"
)
