package protocol

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"kici.dev/kici/internal/runs/status"
)

// sampleMessages holds one message of every type.
func sampleMessages() []any {
	exit := 3
	offset := int64(7)
	return []any{
		&AuthRequest{Type: TypeAuthRequest, Token: "kat_x", ProtocolVersion: Version},
		&AuthSuccess{Type: TypeAuthSuccess, ConnectionID: "c1"},
		&AuthFailure{Type: TypeAuthFailure, Reason: "Token revoked"},
		&AgentRegister{Type: TypeAgentRegister, MessageID: "m1", AgentID: "a1", Labels: []string{"kici:os:linux"}, InFlightJobs: []InFlightJob{{JobID: "j1", RunID: "r1"}}},
		&RegisterAck{Type: TypeRegisterAck, AgentID: "a1", Labels: []string{"x"}, PendingDispatch: true},
		&Heartbeat{Type: TypeHeartbeat, Timestamp: 1},
		&AgentStatus{Type: TypeAgentStatus, AgentID: "a1", ActiveJobs: 1},
		&JobDispatch{Type: TypeJobDispatch, RunID: "r1", JobID: "j1", JobConfig: json.RawMessage(`{"name":"build"}`), Env: map[string]string{"KICI_RUN_ID": "r1"}},
		&JobCancel{Type: TypeJobCancel, RunID: "r1", JobID: "j1", Reason: "user", Force: true},
		&JobAck{Type: TypeJobAck, RunID: "r1", JobID: "j1"},
		&JobReject{Type: TypeJobReject, RunID: "r1", JobID: "j1", Reason: RejectBusy},
		&JobStatus{Type: TypeJobStatus, RunID: "r1", JobID: "j1", State: status.JobFailed, Data: &JobStatusData{Error: "boom", StepResults: []StepResult{{Name: "s", Status: status.StepFailed}}}},
		&StepStatus{Type: TypeStepStatus, RunID: "r1", JobID: "j1", StepIndex: 2, State: status.StepFailed, Data: &StepStatusData{ExitCode: &exit}},
		&LogChunk{Type: TypeLogChunk, RunID: "r1", JobID: "j1", StepIndex: -1, Seq: 4, Lines: []LogLine{{Timestamp: 5, Stream: StreamStderr, Text: "hi"}}},
		&LogChunk{Type: TypeLogChunk, RunID: "r1", JobID: "j1", StepIndex: 0, Seq: 5, Lines: []LogLine{{Text: "x"}}, Offset: &offset},
		&LogAck{Type: TypeLogAck, RunID: "r1", JobID: "j1", StepIndex: 0, Offset: 8},
		&AgentRegister{Type: TypeAgentRegister, AgentID: "a1", LogAcks: true},
		&RegisterAck{Type: TypeRegisterAck, AgentID: "a1", LogAcks: true},
		&JobHeartbeat{Type: TypeJobHeartbeat, RunID: "r1", JobID: "j1"},
		&ErrorMessage{Type: TypeErrorMessage, Code: ErrorInvalidMessage, Message: "bad"},
		&ProvenanceAttest{Type: TypeProvenanceAttest, RequestID: "q1", RunID: "r1", JobID: "j1", Subjects: []AttestSubject{{Name: "a", Digest: map[string]string{"sha256": "00"}}}},
		&ProvenanceAttestResult{Type: TypeProvenanceAttestResult, RequestID: "q1", JobID: "j1", OK: true, Attestations: []AttestationRef{{ID: "x", SubjectName: "a", SubjectDigest: "sha256:00"}}},
	}
}

// Every message type survives an encode/decode round trip as its own struct.
func TestDecodeRoundTrip(t *testing.T) {
	for _, m := range sampleMessages() {
		frame, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Decode(frame)
		if err != nil {
			t.Fatalf("Decode(%s): %v", frame, err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Errorf("round trip of %T:\n got %#v\nwant %#v", m, got, m)
		}
	}
}

func TestDecodeRejectsBadFrames(t *testing.T) {
	cases := []struct {
		frame, want string
		unknown     bool
	}{
		{`not json`, "malformed frame", false},
		{`{}`, "no type", false},
		{`{"type":""}`, "no type", false},
		{`{"type":"job.status","stepIndex":"x","state":5}`, "invalid job.status", false},
		{`{"type":"step.status","stepIndex":"two"}`, "invalid step.status", false},
		{`{"type":"future.message","x":1}`, "future.message", true},
	}
	for _, c := range cases {
		_, err := Decode([]byte(c.frame))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Decode(%s) error = %v, want it to mention %q", c.frame, err, c.want)
		}
		if got := errors.Is(err, ErrUnknownType); got != c.unknown {
			t.Errorf("Decode(%s): errors.Is(ErrUnknownType) = %v, want %v", c.frame, got, c.unknown)
		}
	}
}

// Unknown fields are ignored so newer peers can add optional fields.
func TestDecodeIgnoresUnknownFields(t *testing.T) {
	m, err := Decode([]byte(`{"type":"job.ack","runId":"r","jobId":"j","timestamp":1,"futureField":{"a":1}}`))
	if err != nil {
		t.Fatal(err)
	}
	ack := m.(*JobAck)
	if ack.RunID != "r" || ack.JobID != "j" {
		t.Errorf("ack = %+v", ack)
	}
}

// A log.chunk's lines are decoded into one slice sized from the frame, and
// a frame of repeated "msg" keys cannot make that slice larger than
// maxLineCountHint lines.
func TestLogChunkLinesSizedFromTheFrame(t *testing.T) {
	frame, _ := json.Marshal(benchChunk())
	msg, err := Decode(frame)
	if err != nil {
		t.Fatal(err)
	}
	if lc := msg.(*LogChunk); len(lc.Lines) != 2000 || cap(lc.Lines) != 2000 || lc.Lines[1999].Text != "1999" {
		t.Fatalf("decoded %d lines into a slice of %d", len(lc.Lines), cap(lc.Lines))
	}
	keys := strings.Repeat(`"msg":"",`, 100000)
	frame = []byte(`{"type":"log.chunk","runId":"r","jobId":"j","lines":[{` + keys + `"ts":1}]}`)
	msg, err = Decode(frame)
	if err != nil {
		t.Fatal(err)
	}
	if lc := msg.(*LogChunk); len(lc.Lines) != 1 || cap(lc.Lines) > maxLineCountHint {
		t.Fatalf("a frame of repeated keys decoded %d lines into a slice of %d", len(lc.Lines), cap(lc.Lines))
	}
}
