package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/goccy/go-yaml"
)

// pipelineCorpus is where the corpus of real-shaped pipelines lives: one
// directory per pipeline, a small project with its .kici/ and an
// expect.yaml (testdata/pipelines/README.md).
const pipelineCorpus = "../testdata/pipelines"

// pipelineExpect is a pipeline's expect.yaml: how the harness drives it and
// what a user would check afterwards. Unknown keys are refused, so a typo
// cannot silently drop an assertion.
type pipelineExpect struct {
	// Description says what real project the pipeline stands for.
	Description string `yaml:"description"`
	// Short puts the pipeline in `make test`'s short form; the others run
	// only under `make acceptance` (KICI_ACCEPTANCE=1).
	Short bool `yaml:"short"`
	// OrchestratorEnv is extra KEY=VALUE environment of the orchestrator
	// (and so of the agents it spawns).
	OrchestratorEnv []string `yaml:"orchestratorEnv"`
	// Forge, when "gitea" or "gitlab", delivers pushes as that forge's
	// webhooks through a universal-git source whose API is the recording
	// fake (internal/testutil/forgefake); empty: a local source and
	// `kici-admin source trigger-local`.
	Forge string `yaml:"forge"`
	// DockerImages are built before the pipeline runs, by tag (builders in
	// e2e/pipelines_images_test.go).
	DockerImages []string `yaml:"dockerImages"`
	// Contexts are created in org acme before the first run.
	Contexts []contextSetup `yaml:"contexts"`
	// Runs are triggered in order against one orchestrator (so caches
	// saved by one are there for the next).
	Runs []runExpect `yaml:"runs"`
	// Local is the `kici run local` check; nil when it does not apply.
	Local *localExpect `yaml:"local"`
	// Org, instead of runs, makes the pipeline an organization of
	// repositories driven by e2e/pipelines_org_test.go: a library
	// repository (library/) and generated service repositories.
	Org *orgExpect `yaml:"org"`
}

// orgExpect sizes an organization pipeline.
type orgExpect struct {
	// Repos is how many service repositories are generated (svc-01 …);
	// KICI_ORG_REPOS overrides it. Every fifth is a "-legacy" one that the
	// organization-wide workflow's filter excludes.
	Repos int `yaml:"repos"`
	// Users is how many of them (the first ones) use the library's piece
	// through users/ci.yaml.
	Users int `yaml:"users"`
}

// contextSetup is one context the pipeline's jobs bind to.
type contextSetup struct {
	Name              string `yaml:"name"`
	RequiredReviewers string `yaml:"requiredReviewers"`
	// Variables are set on the context (name → value).
	Variables map[string]string `yaml:"variables"`
}

// runExpect is one triggered delivery (or manual run) and its outcome.
type runExpect struct {
	// Name labels the run in failure messages ("second push").
	Name string `yaml:"name"`
	// Change is written (path → content) and committed before the trigger.
	Change map[string]string `yaml:"change"`
	// Manual starts `kici-admin runs start` instead of a push.
	Manual *manualRun `yaml:"manual"`
	// Workflows is the exact set of workflows the delivery runs (path
	// filters); default: one run, any workflow.
	Workflows []string `yaml:"workflows"`
	// NoRun says the delivery must start no run (a branch's first push
	// under path filters: KiCI gives it no changed files).
	NoRun bool `yaml:"noRun"`
	// Cancel cancels the run once a job's log shows a line.
	Cancel *logMark `yaml:"cancel"`
	// Approve waits for the job to be held for a reviewer, then approves.
	Approve *approval `yaml:"approve"`
	// Status is the expected terminal status of every run of the delivery.
	Status string `yaml:"status"`
	// Jobs maps each job (matrix legs by leg name; "workflow/job" when
	// the delivery ran more than one workflow) to its status; every job of
	// the runs must be listed.
	Jobs map[string]string `yaml:"jobs"`
	// JobCount, when set, replaces listing every job: the number of jobs,
	// all with status JobsStatus.
	JobCount   int    `yaml:"jobCount"`
	JobsStatus string `yaml:"jobsStatus"`
	// JobErrors maps a job to text its error message contains.
	JobErrors map[string]string `yaml:"jobErrors"`
	// Steps maps job → step name → status.
	Steps map[string]map[string]string `yaml:"steps"`
	// Logs are lines a step's (or the setup's, step "setup") log contains.
	Logs []logExpect `yaml:"logs"`
	// Outputs maps job → output → value.
	Outputs map[string]map[string]string `yaml:"outputs"`
	// Caches maps job → "miss" (missed and saved) or "hit" (restored
	// the exact key, saved nothing).
	Caches map[string]string `yaml:"caches"`
	// Artifacts are names `kici-admin runs artifacts` lists.
	Artifacts []string `yaml:"artifacts"`
	// Attestations are provenance subjects signed in the run.
	Attestations []string `yaml:"attestations"`
	// Statuses maps a commit-status context (Gitea) or name (GitLab) to
	// the last state the recording forge received.
	Statuses map[string]string `yaml:"statuses"`
}

// manualRun is a `kici-admin runs start`.
type manualRun struct {
	Workflow string            `yaml:"workflow"`
	Inputs   map[string]string `yaml:"inputs"`
	// Refused are input sets the orchestrator must refuse (nothing
	// starts), each with text of the error.
	Refused []refusedInputs `yaml:"refused"`
}

// refusedInputs is one invalid manual start.
type refusedInputs struct {
	Inputs map[string]string `yaml:"inputs"`
	Error  string            `yaml:"error"`
}

// logMark names a job and a line its running step prints.
type logMark struct {
	Job  string `yaml:"job"`
	Line string `yaml:"line"`
}

// approval is a reviewer hold on a job.
type approval struct {
	Job    string `yaml:"job"`
	Reason string `yaml:"reason"`
}

// logExpect is text a job's step log contains (or must not).
type logExpect struct {
	Job string `yaml:"job"`
	// Step is the step name, or "setup" for the job's setup log.
	Step       string   `yaml:"step"`
	Contains   []string `yaml:"contains"`
	NotContain []string `yaml:"notContains"`
}

// localExpect is the `kici run local` check of the same repository.
type localExpect struct {
	// Args follow `kici run local` (e.g. [push, --branch, main]).
	Args []string `yaml:"args"`
	// InterruptAt sends the command SIGINT (Ctrl-C) once its output shows
	// this line.
	InterruptAt string `yaml:"interruptAt"`
	// Fails says the command exits non-zero (a failing pipeline).
	Fails bool `yaml:"fails"`
	// Jobs maps jobs to the statuses the summary prints.
	Jobs map[string]string `yaml:"jobs"`
	// JobCount/JobsStatus as in runExpect.
	JobCount   int      `yaml:"jobCount"`
	JobsStatus string   `yaml:"jobsStatus"`
	Contains   []string `yaml:"contains"`
}

// loadPipelines reads every pipeline of the corpus, by directory name.
func loadPipelines() (map[string]pipelineExpect, []string, error) {
	entries, err := os.ReadDir(pipelineCorpus)
	if err != nil {
		return nil, nil, err
	}
	out := map[string]pipelineExpect{}
	var names []string
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(pipelineCorpus, e.Name(), "expect.yaml"))
		if err != nil {
			return nil, nil, fmt.Errorf("pipeline %s: %w (every pipeline directory has an expect.yaml)", e.Name(), err)
		}
		var p pipelineExpect
		if err := yaml.UnmarshalWithOptions(b, &p, yaml.Strict()); err != nil {
			return nil, nil, fmt.Errorf("pipeline %s: expect.yaml: %w", e.Name(), err)
		}
		if err := p.check(); err != nil {
			return nil, nil, fmt.Errorf("pipeline %s: expect.yaml: %w", e.Name(), err)
		}
		out[e.Name()] = p
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return out, names, nil
}

// check refuses an expect.yaml that would assert nothing or cannot run.
func (p pipelineExpect) check() error {
	if p.Description == "" {
		return fmt.Errorf("description is required")
	}
	if p.Forge != "" && p.Forge != "gitea" && p.Forge != "gitlab" {
		return fmt.Errorf("forge %q: want gitea, gitlab or nothing (a local source)", p.Forge)
	}
	if p.Org != nil {
		if len(p.Runs) > 0 || p.Local != nil || p.Forge != "" {
			return fmt.Errorf("org takes no runs, local or forge: e2e/pipelines_org_test.go drives it")
		}
		if p.Org.Repos < 5 || p.Org.Users < 1 || p.Org.Users > p.Org.Repos {
			return fmt.Errorf("org: want repos ≥ 5 and 1 ≤ users ≤ repos")
		}
		return nil
	}
	if len(p.Runs) == 0 {
		return fmt.Errorf("no runs")
	}
	for i, r := range p.Runs {
		if r.NoRun {
			if r.Status != "" || len(r.Jobs) > 0 || r.JobCount > 0 {
				return fmt.Errorf("runs[%d]: noRun takes no status or jobs", i)
			}
			continue
		}
		if r.Status == "" {
			return fmt.Errorf("runs[%d]: status is required", i)
		}
		if len(r.Jobs) == 0 && r.JobCount == 0 {
			return fmt.Errorf("runs[%d]: list the jobs (or jobCount) the run has", i)
		}
		for job, c := range r.Caches {
			if c != "hit" && c != "miss" {
				return fmt.Errorf("runs[%d]: caches.%s = %q, want hit or miss", i, job, c)
			}
		}
		if len(r.Statuses) > 0 && p.Forge == "" {
			return fmt.Errorf("runs[%d]: statuses need a forge", i)
		}
	}
	if p.Local != nil && len(p.Local.Args) == 0 {
		return fmt.Errorf("local: args are required")
	}
	return nil
}
