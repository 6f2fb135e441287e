package notify

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"time"
)

// Webhook headers. The signature is HMAC-SHA256, keyed with the
// subscription's secret, over "<timestamp>.<body>": binding the timestamp
// lets a receiver refuse a replayed request older than its tolerance
// (docs/notifications.md shows the verification).
const (
	// SignatureHeader carries "sha256=<hex HMAC>".
	SignatureHeader = "X-KiCI-Signature-256"
	// TimestampHeader carries the send time in Unix seconds.
	TimestampHeader = "X-KiCI-Timestamp"
	// DeliveryHeader carries the outbox row's id, the same on every retry
	// (a receiver may deduplicate on it).
	DeliveryHeader = "X-KiCI-Delivery"
	// EventHeader carries "run.<outcome>".
	EventHeader = "X-KiCI-Event"
)

// DefaultTolerance is the replay window Verify allows by default.
const DefaultTolerance = 5 * time.Minute

// Sign returns the SignatureHeader value for body sent at ts.
func Sign(secret string, ts time.Time, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(strconv.FormatInt(ts.Unix(), 10)))
	m.Write([]byte("."))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Errors of Verify.
var (
	// ErrBadSignature: the signature does not match the body and timestamp.
	ErrBadSignature = errors.New("notify: signature mismatch")
	// ErrStale: the timestamp is outside the tolerance (a replay).
	ErrStale = errors.New("notify: timestamp outside tolerance")
)

// Verify checks a received webhook: signature is the SignatureHeader,
// timestamp the TimestampHeader, now the receiver's clock. A tolerance of
// 0 means DefaultTolerance. The comparison is constant-time.
func Verify(secret, signature, timestamp string, body []byte, now time.Time, tolerance time.Duration) error {
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	sec, err := strconv.ParseInt(timestamp, 10, 64)
	if err != nil {
		return ErrStale
	}
	ts := time.Unix(sec, 0)
	if d := now.Sub(ts); d > tolerance || d < -tolerance {
		return ErrStale
	}
	want := Sign(secret, ts, body)
	if !strings.HasPrefix(signature, "sha256=") || !hmac.Equal([]byte(want), []byte(signature)) {
		return ErrBadSignature
	}
	return nil
}
