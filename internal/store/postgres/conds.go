package postgres

import (
	"fmt"
	"strings"
)

// conds collects the AND-ed conditions of a list query and their
// arguments, numbering the placeholders in order.
type conds struct {
	parts []string
	args  []any
}

// add appends cond, whose one placeholder is written "$%d" and becomes the
// number of arg.
func (c *conds) add(cond string, arg any) {
	c.args = append(c.args, arg)
	c.parts = append(c.parts, fmt.Sprintf(cond, len(c.args)))
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
	n := len(c.args)
	return fmt.Sprintf(" LIMIT $%d OFFSET $%d", n+1, n+2), append(append([]any(nil), c.args...), limit, offset)
}
