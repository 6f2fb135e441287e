// Package protocol defines the orchestrator↔agent WebSocket messages. Both
// sides import it, so the wire shape lives in one place.
//
// Transport (see docs/kici-compatibility.md#agent-protocol): one WebSocket per
// agent at GET /ws, JSON text frames, each an object discriminated by "type".
// Field names follow KiCI's protocol (camelCase). Evolution is by adding
// optional fields; a receiver ignores unknown fields and logs unknown types.
package protocol

import (
	"encoding/json"

	"kici.dev/kici/internal/runs/status"
)

// Version is the protocol version this build speaks; MinVersion is the oldest
// the orchestrator accepts (KiCI PROTOCOL_VERSION / MIN_PROTOCOL_VERSION = 1).
const (
	Version    = 1
	MinVersion = 1
)

// MaxFrameBytes caps one decompressed frame: 25 MiB (KiCI WS_MAX_PAYLOAD_BYTES).
const MaxFrameBytes = 25 << 20

// WebSocket close codes used on the agent channel (KiCI close-codes.ts).
const (
	CloseNormal           = 1000
	CloseGoingAway        = 1001
	CloseAuthTimeout      = 4002 // auth or registration timeout
	CloseInvalidMessage   = 4003 // malformed JSON, invalid message, not registered, id collision
	CloseHeartbeatTimeout = 4004
	CloseProtocolError    = 4005 // unsupported protocol version
	CloseInternalError    = 4006
	CloseAuthFailed       = 4010 // bad/expired/revoked token or identity gate: agent stops reconnecting
	CloseAckTimeout       = 4031 // dispatch ack timeout: job requeued
)

// MessageType is the "type" discriminator of an agent-channel frame: one of
// the Type* constants (KiCI's message types, plus the kici additions marked
// below), see docs/kici-compatibility.md#agent-protocol.
type MessageType string

// Message type names.
const (
	// orchestrator → agent
	TypeAuthSuccess  MessageType = "auth.success"
	TypeAuthFailure  MessageType = "auth.failure"
	TypeRegisterAck  MessageType = "register.ack"
	TypeJobDispatch  MessageType = "job.dispatch"
	TypeJobCancel    MessageType = "job.cancel"
	TypeLogAck       MessageType = "log.ack"
	TypeJobStatusAck MessageType = "job.status.ack"
	TypeErrorMessage MessageType = "error"

	// agent → orchestrator
	TypeAuthRequest   MessageType = "auth.request"
	TypeAgentRegister MessageType = "agent.register"
	TypeHeartbeat     MessageType = "heartbeat"
	TypeAgentStatus   MessageType = "agent.status"
	TypeJobAck        MessageType = "job.ack"
	TypeJobReject     MessageType = "job.reject"
	TypeJobStatus     MessageType = "job.status"
	TypeStepStatus    MessageType = "step.status"
	TypeLogChunk      MessageType = "log.chunk"
	TypeJobHeartbeat  MessageType = "job.heartbeat"

	// provenance (kici): agent → orchestrator request, orchestrator → agent answer
	TypeProvenanceAttest       MessageType = "provenance.attest"
	TypeProvenanceAttestResult MessageType = "provenance.attest.result"
)

// Envelope carries only the discriminator; Decode uses it to pick the type.
type Envelope struct {
	Type MessageType `json:"type"`
}

// AuthRequest is the agent's first frame in token mode.
type AuthRequest struct {
	Type            MessageType `json:"type"`
	Token           string      `json:"token"`
	ProtocolVersion int         `json:"protocolVersion"`
}

// AuthSuccess answers a valid AuthRequest.
type AuthSuccess struct {
	Type         MessageType `json:"type"`
	ConnectionID string      `json:"connectionId"`
}

// AuthFailure answers an invalid AuthRequest; the socket then closes with
// CloseAuthFailed and the agent must not reconnect.
type AuthFailure struct {
	Type   MessageType `json:"type"`
	Reason string      `json:"reason"`
}

// InFlightJob names a job an agent still runs when it (re)registers.
type InFlightJob struct {
	JobID string `json:"jobId"`
	RunID string `json:"runId"`
}

// AgentRegister registers (or re-registers) the agent with its labels. Labels
// include the auto labels kici:os:*, kici:arch:*, kici:host:*.
type AgentRegister struct {
	Type           MessageType   `json:"type"`
	MessageID      string        `json:"messageId"`
	AgentID        string        `json:"agentId"`
	Labels         []string      `json:"labels"`
	Platform       string        `json:"platform,omitempty"`
	Arch           string        `json:"arch,omitempty"`
	Version        string        `json:"version,omitempty"`
	Hostname       string        `json:"hostname,omitempty"`
	MaxConcurrency int           `json:"maxConcurrency,omitempty"`
	InFlightJobs   []InFlightJob `json:"inFlightJobs,omitempty"`
	ScalerManaged  bool          `json:"scalerManaged,omitempty"`
	// LogAcks (kici) says the agent numbers its log lines (LogChunk.Offset)
	// and keeps each chunk until a LogAck covers it.
	LogAcks bool `json:"logAcks,omitempty"`
	// StatusAcks (kici) says the agent keeps each terminal JobStatus until
	// a JobStatusAck answers it, sending it again after every reconnect.
	StatusAcks bool `json:"statusAcks,omitempty"`
	// ResumeToken is the RegisterAck.ResumeToken of this agent's previous
	// session, presented when it reconnects. Only a registration with the
	// current session's token may take over a live socket of the same agent
	// id or reclaim that session's in-flight jobs; empty on a first
	// registration (kici addition).
	ResumeToken string `json:"resumeToken,omitempty"`
}

// RegisterAck completes registration. PendingDispatch tells a scaler-spawned
// agent that its bound job is about to be dispatched.
type RegisterAck struct {
	Type            MessageType `json:"type"`
	AgentID         string      `json:"agentId"`
	Labels          []string    `json:"labels"`
	ScalerManaged   bool        `json:"scalerManaged"`
	PendingDispatch bool        `json:"pendingDispatch,omitempty"`
	// LogAcks (kici) answers AgentRegister.LogAcks: the orchestrator stores
	// chunks by offset and acknowledges them with LogAck. Absent, the agent
	// treats a written chunk as delivered.
	LogAcks bool `json:"logAcks,omitempty"`
	// StatusAcks (kici) answers AgentRegister.StatusAcks: the orchestrator
	// answers each terminal JobStatus with a JobStatusAck once the job's
	// status is stored. Absent, the agent replays its terminal statuses
	// after each reconnect for RecentStatusReplayWindow instead.
	StatusAcks bool `json:"statusAcks,omitempty"`
	// ResumeToken is a random secret naming this registration's session
	// (kici addition): the agent keeps it in memory and sends it back in
	// AgentRegister.ResumeToken when it reconnects, proving it is the same
	// agent process and not another holder of the agent token.
	ResumeToken string `json:"resumeToken,omitempty"`
}

// Heartbeat is the connection-level liveness frame, every 30 s.
type Heartbeat struct {
	Type      MessageType `json:"type"`
	Timestamp int64       `json:"timestamp"` // unix ms
}

// AgentStatus is the agent's self-report (informational; the orchestrator's
// own count of active jobs is authoritative).
type AgentStatus struct {
	Type       MessageType `json:"type"`
	AgentID    string      `json:"agentId"`
	ActiveJobs int         `json:"activeJobs"`
	Draining   bool        `json:"draining,omitempty"`
}

// JobDispatch hands a job to an agent. JobConfig is the lock job (one matrix
// leg, with MatrixValues resolved) as JSON. Env holds the KICI_* job variables
// the orchestrator computed. Credentials for the checkout, if any, travel in
// SourceAuth and never inside RepoURL.
type JobDispatch struct {
	Type         MessageType       `json:"type"`
	MessageID    string            `json:"messageId"`
	RunID        string            `json:"runId"`
	JobID        string            `json:"jobId"`
	JobName      string            `json:"jobName"`
	WorkflowName string            `json:"workflowName"`
	RepoURL      string            `json:"repoUrl"`
	Ref          string            `json:"ref"`
	SHA          string            `json:"sha"`
	JobConfig    json.RawMessage   `json:"jobConfig"`
	MatrixValues map[string]string `json:"matrixValues,omitempty"`
	Env          map[string]string `json:"env,omitempty"`
	SourceAuth   *SourceAuth       `json:"sourceAuth,omitempty"`
	// MaxLogSizeBytes caps each step's log (0 = agent default, 10 MiB).
	MaxLogSizeBytes int64 `json:"maxLogSizeBytes,omitempty"`
	// Secrets holds the values of the secrets the job's steps declare
	// (lock `secrets: {NAME: "<scope>:<key>"}`), keyed by the reference
	// "<scope>:<key>". The agent exposes a value only to the steps that
	// declare it, as the declared variable, and masks every value in logs.
	// A declared reference missing here fails its step. Never logged.
	Secrets map[string]string `json:"secrets,omitempty"`
	// ContextVars are the merged variables of the contexts the job names
	// (KiCI context-variables layer): applied after Env and before the
	// job's own env. Not secrets: they may appear in logs.
	ContextVars map[string]string `json:"contextVars,omitempty"`
	// Untrusted marks a job whose code comes from outside the repository's
	// trust boundary (a fork pull request, run trust tier "unknown"). An
	// agent that cannot confine its steps away from its host's credentials
	// refuses it unless its operator opted in (kici addition).
	Untrusted bool  `json:"untrusted,omitempty"`
	Timestamp int64 `json:"timestamp"` // unix ms
	// UpstreamJobOutputs and UpstreamJobStatuses are the outputs and
	// terminal statuses of the jobs this job needs, by YAML job name
	// (KiCI job.dispatch upstreamJobOutputs/Statuses); step conditions
	// read them as needs.<job>.outputs / .result.
	UpstreamJobOutputs  map[string]map[string]string `json:"upstreamJobOutputs,omitempty"`
	UpstreamJobStatuses map[string]status.Job        `json:"upstreamJobStatuses,omitempty"`
	// Inputs are the run's inputs (manual and scheduled runs) and Event
	// what step conditions see of the triggering event. kici.
	Inputs map[string]any `json:"inputs,omitempty"`
	Event  *EventInfo     `json:"event,omitempty"`
	// StepEnvTemplates lists, per step index, the step env keys whose
	// `${{ … }}` templates read `steps` or `env` and were left unexpanded
	// for the agent to expand just before the step runs. Only these are
	// expanded there: a value the orchestrator already expanded is data,
	// even when it contains "${{". kici.
	StepEnvTemplates map[int][]string `json:"stepEnvTemplates,omitempty"`
	// SetupError, when set, fails the job before any step runs (e.g. an
	// env template that could not be evaluated on the orchestrator). kici.
	SetupError string `json:"setupError,omitempty"`
	// JobCredential authenticates this dispatch of the job to the
	// orchestrator's cache and artifact routes (Authorization: Bearer);
	// it is bound to the job, replaced on a redispatch and useless once the
	// job is terminal. Never logged; masked in step output.
	JobCredential string `json:"jobCredential,omitempty"`
}

// EventInfo is the part of the triggering event step conditions see
// beyond the dispatch's ref and sha.
type EventInfo struct {
	Type         string   `json:"type,omitempty"`
	Actor        string   `json:"actor,omitempty"`
	Repo         string   `json:"repo,omitempty"`
	TargetBranch string   `json:"targetBranch,omitempty"`
	ChangedPaths []string `json:"changedPaths,omitempty"`
}

// AuthKind is the scheme of a SourceAuth: AuthBasic, the only one (kici).
type AuthKind string

// AuthBasic is HTTP basic authentication: User and Secret.
const AuthBasic AuthKind = "basic"

// SourceAuth is the checkout credential: HTTP basic (user + secret, sent as an
// Authorization header, never in the URL).
type SourceAuth struct {
	Kind   AuthKind `json:"kind"` // AuthBasic
	User   string   `json:"user"`
	Secret string   `json:"secret"`
}

// JobCancel asks the agent to cancel one job. Force means SIGKILL, no cleanup.
type JobCancel struct {
	Type      MessageType `json:"type"`
	MessageID string      `json:"messageId"`
	RunID     string      `json:"runId"`
	JobID     string      `json:"jobId"`
	Reason    string      `json:"reason"`
	Force     bool        `json:"force,omitempty"`
}

// JobAck acknowledges a dispatch before any work starts.
type JobAck struct {
	Type      MessageType `json:"type"`
	RunID     string      `json:"runId"`
	JobID     string      `json:"jobId"`
	Timestamp int64       `json:"timestamp"`
}

// RejectReason is why an agent refused a dispatch (JobReject.Reason):
// RejectBusy or RejectDraining (KiCI job.reject reasons, see
// docs/kici-compatibility.md#agent-protocol).
type RejectReason string

// Reasons of a job.reject.
const (
	// RejectBusy: the agent already runs as many jobs as it may.
	RejectBusy RejectReason = "busy"
	// RejectDraining: the agent is draining and takes no new job.
	RejectDraining RejectReason = "draining"
)

// JobReject refuses a dispatch; Reason is RejectBusy or RejectDraining.
type JobReject struct {
	Type      MessageType  `json:"type"`
	RunID     string       `json:"runId"`
	JobID     string       `json:"jobId"`
	Reason    RejectReason `json:"reason"`
	Timestamp int64        `json:"timestamp"`
}

// StepResult summarises one step in a terminal JobStatus.
type StepResult struct {
	Name       string      `json:"name"`
	Status     status.Step `json:"status"`
	DurationMs int64       `json:"durationMs"`
	Error      string      `json:"error,omitempty"`
}

// JobStatusData is the optional detail of a JobStatus.
type JobStatusData struct {
	DurationMs  int64        `json:"durationMs,omitempty"`
	Error       string       `json:"error,omitempty"`
	StepResults []StepResult `json:"stepResults,omitempty"`
	// Outputs are the job's exported outputs (lock job `outputs`), after
	// masking; at most MaxJobOutputBytes in all.
	Outputs map[string]string `json:"outputs,omitempty"`
}

// MaxJobOutputBytes caps what a job's steps may write to $KICI_OUTPUT in
// all (keys and values): 1 MiB.
const MaxJobOutputBytes = 1 << 20

// JobStatus reports a job state: running, success, failed or cancelled.
// Applying the same terminal status twice is a no-op on the orchestrator.
type JobStatus struct {
	Type      MessageType    `json:"type"`
	MessageID string         `json:"messageId"`
	RunID     string         `json:"runId"`
	JobID     string         `json:"jobId"`
	State     status.Job     `json:"state"`
	Timestamp int64          `json:"timestamp"`
	Data      *JobStatusData `json:"data,omitempty"`
}

// StepStatusData is the optional detail of a StepStatus.
type StepStatusData struct {
	ExitCode   *int   `json:"exitCode,omitempty"`
	DurationMs int64  `json:"durationMs,omitempty"`
	Error      string `json:"error,omitempty"`
	Attempt    int    `json:"attempt,omitempty"`
}

// JobLogStepIndex is the StepIndex of the job-level log bucket: checkout
// and setup output ("Set up job").
const JobLogStepIndex = -1

// ContainerBuildStepIndex is the StepIndex of the build of a job container
// image from a Dockerfile of the repository (`container: {build: …}`):
// its StepStatus (named ContainerBuildStepName) and its log are a step of
// their own, shown before the job's steps, so the build output is not
// mixed into the setup log. Agents send it only for such jobs.
const ContainerBuildStepIndex = -2

// ContainerBuildStepName is the StepName of ContainerBuildStepIndex.
const ContainerBuildStepName = "Build container image"

// StepStatus reports a step state: running, success, failed, skipped,
// cancelled. StepIndex is the flat 0-based index in the job's steps, or
// one of the reserved negative indexes (ContainerBuildStepIndex).
type StepStatus struct {
	Type             MessageType     `json:"type"`
	RunID            string          `json:"runId"`
	JobID            string          `json:"jobId"`
	StepIndex        int             `json:"stepIndex"`
	StepName         string          `json:"stepName"`
	State            status.Step     `json:"state"`
	Timestamp        int64           `json:"timestamp"`
	Data             *StepStatusData `json:"data,omitempty"`
	LogBytesStreamed int64           `json:"logBytesStreamed,omitempty"`
}

// LogStream names the output a LogLine came from: StreamStdout or
// StreamStderr from an agent (KiCI log.chunk `stream`, see
// docs/kici-compatibility.md#agent-protocol); the orchestrator adds its own
// streams (logstore.CapMarkerStream, scaler.EventStream).
type LogStream string

// Streams of a step's output.
const (
	// StreamStdout is the step's standard output (or both outputs merged).
	StreamStdout LogStream = "stdout"
	// StreamStderr is the step's standard error.
	StreamStderr LogStream = "stderr"
)

// LogLine is one output line of a step. Stream is StreamStdout or
// StreamStderr.
type LogLine struct {
	Timestamp int64     `json:"ts"` // unix ms
	Stream    LogStream `json:"stream,omitempty"`
	Text      string    `json:"msg"`
}

// LogChunk carries a batch of log lines for one step (StepIndex -1 is the
// job-level bucket: checkout and setup; -2 the container image build,
// ContainerBuildStepIndex). Seq numbers chunks per job from 0 so
// the orchestrator can drop replays after a reconnect.
type LogChunk struct {
	Type      MessageType `json:"type"`
	RunID     string      `json:"runId"`
	JobID     string      `json:"jobId"`
	StepIndex int         `json:"stepIndex"`
	Seq       int64       `json:"seq"`
	Lines     []LogLine   `json:"lines"`
	Timestamp int64       `json:"timestamp"`
	// Offset (kici, with LogAcks) is the number of lines the agent emitted
	// for this job and step before the chunk's first line. The orchestrator
	// stores a line once whatever the number of replays: lines below what
	// it already holds from this agent are skipped.
	Offset *int64 `json:"offset,omitempty"`
}

// LogAck (kici) tells an agent that negotiated LogAcks that the first Offset
// lines of a job's step are stored; the agent frees every chunk below.
type LogAck struct {
	Type      MessageType `json:"type"`
	RunID     string      `json:"runId"`
	JobID     string      `json:"jobId"`
	StepIndex int         `json:"stepIndex"`
	Offset    int64       `json:"offset"`
}

// JobStatusAck (kici) tells an agent that negotiated StatusAcks that the
// job's terminal status is stored (the job row is terminal, on whichever
// node answered): the agent stops resending it and may exit. State echoes
// the acknowledged status.
type JobStatusAck struct {
	Type  MessageType `json:"type"`
	RunID string      `json:"runId"`
	JobID string      `json:"jobId"`
	State status.Job  `json:"state"`
}

// JobHeartbeat is the per-job liveness frame while a job runs.
type JobHeartbeat struct {
	Type      MessageType `json:"type"`
	RunID     string      `json:"runId"`
	JobID     string      `json:"jobId"`
	Timestamp int64       `json:"timestamp"`
}

// AttestSubject is one artifact of a ProvenanceAttest: its name and digest
// map; only "sha256" (64 lowercase hex characters) is accepted.
type AttestSubject struct {
	Name   string            `json:"name"`
	Digest map[string]string `json:"digest"`
}

// ProvenanceAttest asks the orchestrator to sign provenance for artifacts a
// running job produced. Only names and digests travel: the orchestrator
// builds the statement from its own run and job records, and accepts the
// request only from the agent that currently owns the job.
type ProvenanceAttest struct {
	Type      MessageType     `json:"type"`
	RequestID string          `json:"requestId"`
	RunID     string          `json:"runId"`
	JobID     string          `json:"jobId"`
	Subjects  []AttestSubject `json:"subjects"`
}

// AttestationRef names one stored attestation bundle.
type AttestationRef struct {
	ID            string `json:"id"`
	SubjectName   string `json:"subjectName"`
	SubjectDigest string `json:"subjectDigest"`
}

// ProvenanceAttestResult answers a ProvenanceAttest with the same RequestID:
// OK with the stored attestations, or an Error.
type ProvenanceAttestResult struct {
	Type         MessageType      `json:"type"`
	RequestID    string           `json:"requestId"`
	JobID        string           `json:"jobId"`
	OK           bool             `json:"ok"`
	Error        string           `json:"error,omitempty"`
	Attestations []AttestationRef `json:"attestations,omitempty"`
}

// ErrorCode classifies an ErrorMessage (KiCI's error frame `code`, see
// docs/kici-compatibility.md#agent-protocol).
type ErrorCode string

// ErrorInvalidMessage is the code of the error frame sent before a close
// with CloseInvalidMessage: a malformed or unexpected frame.
const ErrorInvalidMessage ErrorCode = "INVALID_MESSAGE"

// ErrorMessage reports a protocol error to the peer before a close.
type ErrorMessage struct {
	Type    MessageType `json:"type"`
	Code    ErrorCode   `json:"code"`
	Message string      `json:"message"`
}
