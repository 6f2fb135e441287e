package boundedre

// OpenMatches reports whether r's expression, its bounds written open,
// matches s: whether a string r refuses is refused by its length alone.
func (r *Regexp) OpenMatches(s string) bool { return r.open.MatchString(s) }
