package sqlstore

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"kici.dev/kici/internal/runs/status"
)

// Reading times back: SQLite returns INTEGER Unix milliseconds, pgx's
// driver a time.Time; both come back in UTC.

// timeCol scans a NOT NULL time column into *p.
type timeCol struct{ p *time.Time }

// Scan implements sql.Scanner.
func (c timeCol) Scan(src any) error {
	t, ok, err := decodeTime(src)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("NULL in a NOT NULL time column")
	}
	*c.p = t
	return nil
}

// nullTimeCol scans a nullable time column into *p (nil for NULL).
type nullTimeCol struct{ p **time.Time }

// Scan implements sql.Scanner.
func (c nullTimeCol) Scan(src any) error {
	t, ok, err := decodeTime(src)
	if err != nil {
		return err
	}
	if !ok {
		*c.p = nil
		return nil
	}
	*c.p = &t
	return nil
}

func decodeTime(src any) (time.Time, bool, error) {
	switch v := src.(type) {
	case nil:
		return time.Time{}, false, nil
	case int64:
		return time.UnixMilli(v).UTC(), true, nil
	case time.Time:
		return v.UTC(), true, nil
	default:
		return time.Time{}, false, fmt.Errorf("time column holds %T", src)
	}
}

func tcol(p *time.Time) sql.Scanner   { return timeCol{p} }
func ntcol(p **time.Time) sql.Scanner { return nullTimeCol{p} }

// nullInt64Col scans a nullable integer column into *p (nil for NULL).
type nullInt64Col struct{ p **int64 }

// Scan implements sql.Scanner.
func (c nullInt64Col) Scan(src any) error {
	var n sql.NullInt64
	if err := n.Scan(src); err != nil {
		return err
	}
	if !n.Valid {
		*c.p = nil
		return nil
	}
	v := n.Int64
	*c.p = &v
	return nil
}

func ni64col(p **int64) sql.Scanner { return nullInt64Col{p} }

// jsonCol scans a nullable JSON column (TEXT on SQLite, jsonb or text on
// PostgreSQL) by decoding it into dst; NULL leaves dst untouched (nil).
type jsonCol struct {
	dst  any
	what string
}

// Scan implements sql.Scanner.
func (c jsonCol) Scan(src any) error {
	var b []byte
	switch v := src.(type) {
	case nil:
		return nil
	case string:
		b = []byte(v)
	case []byte:
		b = v
	default:
		return fmt.Errorf("%s: JSON column holds %T", c.what, src)
	}
	if err := json.Unmarshal(b, c.dst); err != nil {
		return fmt.Errorf("%s: %w", c.what, err)
	}
	return nil
}

// rawCol scans a nullable text column holding JSON verbatim into *p; NULL
// and "" give nil.
type rawCol struct{ p *json.RawMessage }

// Scan implements sql.Scanner.
func (c rawCol) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*c.p = nil
	case string:
		*c.p = rawOrNil([]byte(v))
	case []byte:
		*c.p = rawOrNil(append([]byte(nil), v...))
	default:
		return fmt.Errorf("JSON text column holds %T", src)
	}
	return nil
}

func rawOrNil(b []byte) json.RawMessage {
	if len(b) == 0 {
		return nil
	}
	return json.RawMessage(b)
}

func now() time.Time { return time.Now().UTC().Truncate(time.Millisecond) }

func strArg(p *string) any {
	if p == nil {
		return nil
	}
	return *p
}

func int64Arg(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}

// jsonArg encodes v as JSON text, or NULL when isNil.
func jsonArg(v any, isNil bool) (any, error) {
	if isNil {
		return nil, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return string(b), nil
}

// rawArg stores verbatim JSON as text, NULL when empty.
func rawArg(r json.RawMessage) any {
	if len(r) == 0 {
		return nil
	}
	return string(r)
}

// inList is the condition "col IN (the values)" (or NOT IN when negate)
// with one "?" placeholder a value, and its arguments. An empty list is
// never matched by IN and always by NOT IN.
func inList[S ~string](col string, vals []S, negate bool) (string, []any) {
	if len(vals) == 0 {
		if negate {
			return "1=1", nil
		}
		return "1=0", nil
	}
	args := make([]any, len(vals))
	for i, v := range vals {
		args[i] = string(v)
	}
	op := " IN ("
	if negate {
		op = " NOT IN ("
	}
	return col + op + strings.Repeat("?,", len(vals)-1) + "?)", args
}

// statusCond is the condition on column `status` of a transition: status
// in from, or (nil from) status not terminal.
func statusCond[S ~string](from []S, terminal []string) (string, []any) {
	if from == nil {
		return inList("status", terminal, true)
	}
	return inList("status", status.Strings(from), false)
}

// stringList encodes a string list as a JSON array, "[]" for nil.
func stringList(l []string) string {
	if len(l) == 0 {
		return "[]"
	}
	b, _ := json.Marshal(l)
	return string(b)
}
