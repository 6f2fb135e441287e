package sqlstore

import "strings"

// conds collects the AND-ed conditions of a list query and their
// arguments, in placeholder order. Conditions use plain "?" placeholders.
type conds struct {
	parts []string
	args  []any
}

// add appends cond, whose "?" placeholders take args in order.
func (c *conds) add(cond string, args ...any) {
	c.parts = append(c.parts, cond)
	c.args = append(c.args, args...)
}

// where returns " WHERE a AND b …", or "" when there is no condition.
func (c *conds) where() string {
	if len(c.parts) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(c.parts, " AND ")
}

// page returns the LIMIT/OFFSET clause and the arguments of the whole
// query (the conditions' followed by limit and offset).
func (c *conds) page(limit, offset int) (string, []any) {
	return " LIMIT ? OFFSET ?", append(append([]any(nil), c.args...), limit, offset)
}
