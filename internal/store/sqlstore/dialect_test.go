package sqlstore

import "testing"

func TestRebind(t *testing.T) {
	for _, tc := range []struct {
		in, sqlite, postgres string
	}{
		{`SELECT a FROM t WHERE b = ? AND c = ?`, `SELECT a FROM t WHERE b = ? AND c = ?`, `SELECT a FROM t WHERE b = $1 AND c = $2`},
		{`WHERE ?1 = '' OR org_id = ?1 LIMIT ?2`, `WHERE ?1 = '' OR org_id = ?1 LIMIT ?2`, `WHERE $1 = '' OR org_id = $1 LIMIT $2`},
		{`SET a = ?::jsonb, b = COALESCE(?::text, b) WHERE c::text[] <> ?`,
			`SET a = ?, b = COALESCE(?, b) WHERE c <> ?`,
			`SET a = $1::jsonb, b = COALESCE($2::text, b) WHERE c::text[] <> $3`},
		{`SELECT 'a?b::c', ? FROM t WHERE x LIKE 'refs/heads/%'`, `SELECT 'a?b::c', ? FROM t WHERE x LIKE 'refs/heads/%'`,
			`SELECT 'a?b::c', $1 FROM t WHERE x LIKE 'refs/heads/%'`},
		{`?12::timestamptz IS NULL`, `?12 IS NULL`, `$12::timestamptz IS NULL`},
	} {
		if got := SQLite().rebind(tc.in); got != tc.sqlite {
			t.Errorf("sqlite rebind(%q) = %q, want %q", tc.in, got, tc.sqlite)
		}
		if got := Postgres().rebind(tc.in); got != tc.postgres {
			t.Errorf("postgres rebind(%q) = %q, want %q", tc.in, got, tc.postgres)
		}
	}
}

func TestInList(t *testing.T) {
	for _, tc := range []struct {
		vals   []string
		negate bool
		cond   string
		n      int
	}{
		{nil, false, "1=0", 0},
		{nil, true, "1=1", 0},
		{[]string{"a"}, false, "status IN (?)", 1},
		{[]string{"a", "b", "c"}, true, "status NOT IN (?,?,?)", 3},
	} {
		cond, args := inList("status", tc.vals, tc.negate)
		if cond != tc.cond || len(args) != tc.n {
			t.Errorf("inList(%v, %v) = %q with %d args, want %q with %d", tc.vals, tc.negate, cond, len(args), tc.cond, tc.n)
		}
	}
}
