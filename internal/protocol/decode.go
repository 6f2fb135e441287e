package protocol

// Decoding frames: the message type first, then the whole frame into its
// struct.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	fastjson "github.com/segmentio/encoding/json"
)

// ErrUnknownType is returned by Decode for a well-formed frame whose type this
// build does not know; callers log and ignore it.
var ErrUnknownType = errors.New("protocol: unknown message type")

// Decode parses one frame and returns a pointer to the concrete message
// struct for its type. Errors: malformed JSON or a missing type (invalid
// message), or ErrUnknownType wrapped with the type name.
func Decode(frame []byte) (any, error) {
	if t, ok := leadingType(frame); ok {
		msg, err := decodeAs(t, frame)
		if err != nil || typeOf(msg) == t {
			return msg, err
		}
		// Another member also set the type (a duplicate, or a key in other
		// case): fall back to the envelope's reading of the frame.
	}
	var env Envelope
	if err := json.Unmarshal(frame, &env); err != nil {
		return nil, fmt.Errorf("protocol: malformed frame: %w", err)
	}
	return decodeAs(env.Type, frame)
}

// typeOf returns the Type member of a decoded message.
func typeOf(msg any) MessageType {
	return MessageType(reflect.ValueOf(msg).Elem().FieldByName("Type").String())
}

// decodeAs decodes frame as the message struct of type t.
func decodeAs(t MessageType, frame []byte) (any, error) {
	env := Envelope{Type: t}
	var msg any
	switch env.Type {
	case TypeAuthRequest:
		msg = &AuthRequest{}
	case TypeAuthSuccess:
		msg = &AuthSuccess{}
	case TypeAuthFailure:
		msg = &AuthFailure{}
	case TypeAgentRegister:
		msg = &AgentRegister{}
	case TypeRegisterAck:
		msg = &RegisterAck{}
	case TypeHeartbeat:
		msg = &Heartbeat{}
	case TypeAgentStatus:
		msg = &AgentStatus{}
	case TypeJobDispatch:
		msg = &JobDispatch{}
	case TypeJobCancel:
		msg = &JobCancel{}
	case TypeLogAck:
		msg = &LogAck{}
	case TypeJobStatusAck:
		msg = &JobStatusAck{}
	case TypeJobAck:
		msg = &JobAck{}
	case TypeJobReject:
		msg = &JobReject{}
	case TypeJobStatus:
		msg = &JobStatus{}
	case TypeStepStatus:
		msg = &StepStatus{}
	case TypeLogChunk:
		msg = &LogChunk{Lines: make([]LogLine, 0, lineCountHint(frame))}
	case TypeJobHeartbeat:
		msg = &JobHeartbeat{}
	case TypeErrorMessage:
		msg = &ErrorMessage{}
	case TypeProvenanceAttest:
		msg = &ProvenanceAttest{}
	case TypeProvenanceAttestResult:
		msg = &ProvenanceAttestResult{}
	case "":
		return nil, errors.New("protocol: frame has no type")
	default:
		return nil, fmt.Errorf("%w %q", ErrUnknownType, env.Type)
	}
	// segmentio's decoder is a drop-in for encoding/json (same rules, copied
	// strings) and decodes large log.chunk frames many times faster.
	if err := fastjson.Unmarshal(frame, msg); err != nil {
		return nil, fmt.Errorf("protocol: invalid %s: %w", env.Type, err)
	}
	return msg, nil
}

// maxLineCountHint bounds lineCountHint: kici agents send at most 2,000
// lines a frame, and a frame of repeated keys must not make the decoder
// allocate more than 4,096 lines (160 KiB) ahead of what it decodes.
const maxLineCountHint = 4096

// lineCountHint estimates a log.chunk frame's lines as its "msg" keys,
// so that its lines are decoded into one slice of the right size rather
// than one grown from ten by doubling (about twice the lines' size again
// in garbage for every frame). A key inside a text cannot match: its
// quotes are escaped there.
func lineCountHint(frame []byte) int {
	return min(bytes.Count(frame, []byte(`"msg":`)), maxLineCountHint)
}

// leadingType reads the type of a frame that starts with its "type" member,
// as every frame this package encodes does, without a decoding pass over
// the whole frame. Any other shape reports false and is decoded in full.
func leadingType(frame []byte) (MessageType, bool) {
	const prefix = `{"type":"`
	if !bytes.HasPrefix(frame, []byte(prefix)) {
		return "", false
	}
	rest := frame[len(prefix):]
	end := bytes.IndexByte(rest, '"')
	if end <= 0 || end > 64 || bytes.IndexByte(rest[:end], '\\') >= 0 {
		return "", false
	}
	return MessageType(rest[:end]), true
}
