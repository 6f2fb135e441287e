package protocol

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

// FuzzDecode feeds arbitrary frames to Decode, the first thing the
// orchestrator does with every frame an agent (or anyone who reaches /ws)
// sends. It must never panic; a frame it accepts is the struct of the type
// the frame names, and re-encoding is stable (decode ∘ encode is a fixed
// point after one round), so what is logged or replayed is what was acted on.
func FuzzDecode(f *testing.F) {
	for _, m := range sampleMessages() {
		b, err := json.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{``, `{}`, `null`, `[]`, `{"type":""}`, `{"type":"job.status","type":"job.ack"}`,
		`{"type":"log.chunk","lines":[{"ts":1e400}]}`, `{"type":"step.status","data":{"exitCode":null}}`,
		`{"type":"job.dispatch","jobConfig":{"a":[1,2,{"b":"\u0000"}]},"secrets":{"a:b":"\ud800"}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		msg, err := Decode(frame)
		if err != nil {
			if msg != nil {
				t.Fatalf("Decode returned %T with error %v", msg, err)
			}
			return
		}
		var env Envelope
		if err := json.Unmarshal(frame, &env); err != nil {
			t.Fatalf("Decode accepted a frame the envelope rejects: %v", err)
		}
		if got := reflect.ValueOf(msg).Elem().FieldByName("Type").String(); got != string(env.Type) {
			t.Fatalf("frame of type %q decoded as a %T whose type is %q", env.Type, msg, got)
		}
		b1, err := json.Marshal(msg)
		if err != nil {
			t.Fatalf("re-encoding %T: %v", msg, err)
		}
		msg2, err := Decode(b1)
		if err != nil {
			t.Fatalf("re-encoded %T does not decode: %v\n%s", msg, err, b1)
		}
		if reflect.TypeOf(msg2) != reflect.TypeOf(msg) {
			t.Fatalf("re-encoded %T decodes as %T", msg, msg2)
		}
		b2, err := json.Marshal(msg2)
		if err != nil || !bytes.Equal(b1, b2) {
			t.Fatalf("encoding is not stable:\n%s\n%s", b1, b2)
		}
	})
}
