// Package lockfile defines the kici lock file (.kici/kici.lock.json), which
// keeps KiCI's schema 29 shape (workflows, triggers, jobs, needs, matrix,
// labels, concurrency) and adds shell steps (`run`). It also holds the YAML
// workflow compiler, validation and the content hashes.
package lockfile

import (
	"encoding/json"

	"kici.dev/kici/internal/runs/status"
)

// SchemaVersion is the lock schema version this reader and writer speak.
// Source: KiCI packages/engine/src/trigger/types.ts SCHEMA_VERSION = 29.
const SchemaVersion = 29

// CompileSchemaVersion is the per-workflow compile schema version used in the
// per-workflow contentHash formula sha256("5:" + LF(source)).
const CompileSchemaVersion = 5

// Path is the lock file location relative to the repository root.
const Path = ".kici/kici.lock.json"

// WorkflowDir is where YAML workflows live, relative to the repository root.
const WorkflowDir = ".kici/workflows"

// LockFile is the whole lock document. Field order is emission order, which
// the top-level ContentHash depends on (KiCI generator.ts).
type LockFile struct {
	SchemaVersion int        `json:"schemaVersion"`
	Source        SourceRef  `json:"source"`
	ContentHash   string     `json:"contentHash"`
	LockfileHash  string     `json:"lockfileHash,omitempty"`
	Workflows     []Workflow `json:"workflows"`
}

// SourceRef names where a workflow was authored: a repo-relative file and an
// export reference ("#default" for a YAML document).
type SourceRef struct {
	File   string `json:"file"`
	Export string `json:"export"`
}

// Workflow is one lock workflow entry (KiCI LockWorkflow).
type Workflow struct {
	Name                 string       `json:"name"`
	Source               SourceRef    `json:"source"`
	ContentHash          string       `json:"contentHash"`
	CompileSchemaVersion int          `json:"compileSchemaVersion"`
	Triggers             []Trigger    `json:"triggers"`
	Jobs                 []Job        `json:"jobs"`
	Description          string       `json:"description,omitempty"`
	Concurrency          *Concurrency `json:"concurrency,omitempty"`
	// Timeout is the whole-run wall-clock limit in milliseconds (0 = none).
	Timeout int64 `json:"timeout,omitempty"`
	// Drift is what a run does when the workflow file at the run's commit
	// no longer matches ContentHash: "" or "fail" fails the jobs, "warn"
	// runs the lock and logs a warning (kici, YAML `drift:`).
	Drift string `json:"drift,omitempty"`
	// Pieces lists the reusable pieces the workflow's jobs and steps were
	// expanded from, with the commit or content hash each resolved to
	// (kici, YAML `uses:`; pieces.go).
	Pieces []PieceOrigin `json:"pieces,omitempty"`
}

// Concurrency is the workflow-level concurrency setting. Group is a kici
// extension: a template over event fields (e.g. "deploy-${ref}").
type Concurrency struct {
	HasGroup         bool   `json:"hasGroup"`
	Group            string `json:"group,omitempty"`
	CancelInProgress *bool  `json:"cancelInProgress,omitempty"`
	Max              int    `json:"max,omitempty"`
}

// Pattern is a branch/tag/ref pattern: {type: glob|regex, pattern, flags?}
// (KiCI LockBranchPattern).
type Pattern struct {
	Type    PatternType `json:"type"`
	Pattern string      `json:"pattern"`
	Flags   string      `json:"flags,omitempty"`
}

// LabelMatcher is a runsOn element: {kind:"exact", value} or
// {kind:"regex", source, flags} (KiCI labels-match.ts). Nothing else is valid.
type LabelMatcher struct {
	Kind   MatcherKind `json:"kind"`
	Value  string      `json:"value,omitempty"`
	Source string      `json:"source,omitempty"`
	Flags  string      `json:"flags,omitempty"`
}

// Trigger is one trigger entry, discriminated by Type (`_type`). It carries the
// union of every trigger kind's fields; each kind uses its own subset
// (see docs/kici-compatibility.md#triggers).
type Trigger struct {
	Type string `json:"_type"`

	// pr
	Events         []string  `json:"events,omitempty"`
	TargetBranches []Pattern `json:"targetBranches,omitempty"`
	SourceBranches []Pattern `json:"sourceBranches,omitempty"`
	// push
	Branches []Pattern `json:"branches,omitempty"`
	// pr, push: path globs, "!" prefix excludes.
	Paths []string `json:"paths,omitempty"`
	// tag, create, delete
	Patterns []Pattern `json:"patterns,omitempty"`
	// Repos filters on the event's source repo ("owner/repo" globs or regex).
	Repos []Pattern `json:"repos,omitempty"`

	// CommentOn below is the lock's `source`: issue|pr for comment; the
	// emitting repo for kici_event, workflow_complete and job_complete; the
	// generic source name for generic_webhook.
	// comment, review, review_comment, release, star, watch, workflow_run, webhook
	Actions     []string        `json:"actions,omitempty"`
	CommentOn   string          `json:"source,omitempty"`
	BodyMatch   *Pattern        `json:"bodyMatch,omitempty"`
	States      []string        `json:"states,omitempty"`
	Types       []string        `json:"types,omitempty"`
	RefTypes    []string        `json:"refTypes,omitempty"`
	Contexts    []string        `json:"contexts,omitempty"`
	Workflows   []string        `json:"workflows,omitempty"`
	Conclusions []string        `json:"conclusions,omitempty"`
	Inputs      json.RawMessage `json:"inputs,omitempty"`

	// kici_event, workflow_complete, job_complete, generic_webhook
	EventName string          `json:"eventName,omitempty"`
	Match     json.RawMessage `json:"match,omitempty"`
	Not       json.RawMessage `json:"not,omitempty"`
	Name      string          `json:"name,omitempty"`
	Workflow  string          `json:"workflow,omitempty"`
	Job       string          `json:"job,omitempty"`
	Status    []string        `json:"status,omitempty"`
	// lifecycle: source repos ("owner/repo", exact) the event must come from.
	Sources []string `json:"sources,omitempty"`

	// push, pr: the trigger gates (gates.go). CommitMessage filters the
	// head commit's message; Requires lists files whose content at the
	// event's commit must match; SkipCI false turns off the `[skip ci]` /
	// `[ci skip]` rule, which is on when nil.
	CommitMessage *CommitMessageFilter `json:"commitMessage,omitempty"`
	Requires      []Requirement        `json:"requires,omitempty"`
	SkipCI        *bool                `json:"skipCi,omitempty"`

	// schedule
	CronExpression string `json:"cronExpression,omitempty"`
	Timezone       string `json:"timezone,omitempty"`
	Description    string `json:"description,omitempty"`
}

// Need is one `needs` entry. In JSON it is either a plain job name (meaning
// runOn ["success"]) or {name, runOn}. RunOn lists the upstream terminal
// statuses that let the downstream job run.
//
// Group is set instead of Name for a KiCI need on a dynamic job group
// ({group, runOn}); kici's YAML compiler never emits it.
// A nil RunOn is treated as ["success"].
type Need struct {
	Name  string       `json:"name"`
	RunOn []status.Job `json:"runOn,omitempty"`
	Group string       `json:"group,omitempty"`
}

// Matrix is a static job matrix: {_type:"static", values} where values is a
// list (legs named by value) or an object of dimensions.
type Matrix struct {
	Type   MatrixType      `json:"_type"`
	Values json.RawMessage `json:"values"`
}

// Retry is a step retry policy (KiCI LockStep.retry). Delays in milliseconds.
type Retry struct {
	MaxAttempts int    `json:"maxAttempts"`
	DelayMs     int64  `json:"delayMs"`
	Backoff     string `json:"backoff"`
	MaxDelayMs  int64  `json:"maxDelayMs"`
}

// Location is a source position (1-based line and column).
type Location struct {
	File   string `json:"file"`
	Line   int    `json:"line"`
	Column int    `json:"column"`
}

// Step is one lock step. `run`, `shell`, `env`, `workingDirectory` are kici
// extensions; a step without Run came from KiCI's TypeScript compiler.
type Step struct {
	Name            string `json:"name"`
	HasOutputs      bool   `json:"hasOutputs"`
	ContinueOnError bool   `json:"continueOnError,omitempty"`
	// Timeout is the per-attempt limit in milliseconds (0 = agent default).
	Timeout          int64             `json:"timeout,omitempty"`
	Retry            *Retry            `json:"retry,omitempty"`
	SourceLocation   *Location         `json:"sourceLocation,omitempty"`
	Run              string            `json:"run,omitempty"`
	Shell            string            `json:"shell,omitempty"`
	Env              map[string]string `json:"env,omitempty"`
	WorkingDirectory string            `json:"workingDirectory,omitempty"`
	// RunOn is the set of job states (success, failed, cancelled) in which
	// the step runs; empty means ["success"]: only while no earlier step
	// failed and the job is not cancelled. A step with "cancelled" is a
	// cleanup step: it runs after a graceful cancel (never after a forced
	// one). kici extension, YAML `when`.
	RunOn []string `json:"runOn,omitempty"`
	// Attest lists files (relative to the checkout) the step produced and
	// whose provenance the orchestrator signs after the step succeeds (kici).
	Attest []string `json:"attest,omitempty"`
	// Secrets maps an environment variable name to a secret reference
	// "<scope>:<key>"; only this step sees those values (kici, YAML
	// `secrets:`), in addition to the job's Secrets.
	Secrets map[string]string `json:"secrets,omitempty"`
	// If is the step's condition (internal/expr, StepEnv); the step runs
	// only when it is true, in addition to RunOn. kici, YAML `if:`.
	If string `json:"if,omitempty"`
}

// Job is a static job entry (KiCI LockJob, `_type: "static"`). Field order is
// KiCI's emission order for the fields kici supports.
type Job struct {
	Type          JobType        `json:"_type"`
	Name          string         `json:"name"`
	RunsOn        []LabelMatcher `json:"runsOn"`
	ExcludeLabels []LabelMatcher `json:"excludeLabels,omitempty"`
	RunsOnPick    string         `json:"runsOnPick,omitempty"`
	Needs         []Need         `json:"needs"`
	Steps         []Step         `json:"steps"`
	Matrix        *Matrix        `json:"matrix,omitempty"`
	// Include entries keep their authored key order in JSON (it names
	// include legs, KiCI format.ts); see Job.MarshalJSON.
	Include     []map[string]string `json:"include,omitempty"`
	Exclude     []map[string]string `json:"exclude,omitempty"`
	Description string              `json:"description,omitempty"`
	Checkout    *bool               `json:"checkout,omitempty"`
	Env         map[string]string   `json:"env,omitempty"`
	// GracePeriod is the SIGTERM→SIGKILL window on cancel, in seconds.
	GracePeriod int `json:"gracePeriod,omitempty"`
	// Timeout is the job wall-clock limit in milliseconds (0 = none).
	Timeout int64 `json:"timeout,omitempty"`
	// Secrets maps an environment variable name to a secret reference
	// "<scope>:<key>" exposed to every step of the job (kici, YAML
	// `secrets:`); a step's own Secrets win for the same name.
	Secrets map[string]string `json:"secrets,omitempty"`
	// GitCredentials is the secret reference "<scope>:<key>" the job's git
	// commands authenticate with (gitcredentials.go); "" = none.
	GitCredentials string `json:"gitCredentials,omitempty"`
	// Contexts are the names of the contexts the job binds to, in declared
	// order (KiCI LockJob.contexts, static entries only). A name may use
	// the wildcards `*` and `?`; at dispatch each name is matched against
	// the org's contexts, and names that match nothing are skipped.
	Contexts []string `json:"contexts,omitempty"`
	// Cache, Artifacts, Download, Container and Services: see jobblobs.go.
	Cache     []Cache    `json:"cache,omitempty"`
	Artifacts []Artifact `json:"artifacts,omitempty"`
	// Download names artifacts of jobs in Needs, extracted into the
	// workspace before the first step.
	Download  []string   `json:"download,omitempty"`
	Container *Container `json:"container,omitempty"`
	Services  []Service  `json:"services,omitempty"`
	// If is the job's condition (internal/expr, Env), evaluated on the
	// orchestrator once the needs are met; false skips the job. kici, YAML
	// `if:`.
	If string `json:"if,omitempty"`
	// Outputs maps an exported output name to "<step>.<key>": the value the
	// step wrote as key to $KICI_OUTPUT. Dependent jobs read it as
	// needs.<job>.outputs.<name>. kici, YAML `outputs:`.
	Outputs map[string]string `json:"outputs,omitempty"`
	// PieceOverrides names the keys ("env", "if", "runsOn", sorted) a job
	// written as `uses:` a job piece set over the piece's job: their
	// values above are the using job's (env merged over the piece's),
	// so a reader of the lock sees what was changed. kici (pieces.go).
	PieceOverrides []string `json:"pieceOverrides,omitempty"`
	// DriftCheck is added by the orchestrator when it creates a run, never
	// by the compiler (drift.go).
	DriftCheck *DriftCheck `json:"driftCheck,omitempty"`

	// includeKeys[i] is the authored key order of Include[i] (nil = sorted).
	includeKeys [][]string
}
