package lockfile

// PatternType is how a Pattern's text is read: PatternGlob or PatternRegex
// (KiCI LockBranchPattern `type`, see docs/kici-compatibility.md#lock-file).
type PatternType string

// Pattern types of the lock file.
const (
	// PatternGlob matches with kici's glob syntax (trigger/pattern.CompileGlob).
	PatternGlob PatternType = "glob"
	// PatternRegex matches with an RE2 regular expression and its flags.
	PatternRegex PatternType = "regex"
)

// MatcherKind is the shape of a LabelMatcher: MatcherExact or MatcherRegex
// (KiCI labels-match.ts `kind`, see docs/kici-compatibility.md#matching).
type MatcherKind string

// Label matcher kinds of the lock file.
const (
	// MatcherExact matches the one label equal to LabelMatcher.Value.
	MatcherExact MatcherKind = "exact"
	// MatcherRegex matches the labels LabelMatcher.Source (with Flags) matches.
	MatcherRegex MatcherKind = "regex"
)

// JobType is a lock job's `_type` discriminator (KiCI LockJob). kici reads
// only static jobs; see docs/kici-compatibility.md#lock-file.
type JobType string

// JobStatic is the `_type` of a static job entry, the only kind kici runs.
const JobStatic JobType = "static"

// MatrixType is a job matrix's `_type` discriminator (KiCI LockJob.matrix).
// kici reads only static matrices; see docs/kici-compatibility.md#lock-file.
type MatrixType string

// MatrixStatic is the `_type` of a matrix whose legs are listed in the lock.
const MatrixStatic MatrixType = "static"

// InputType is the value type an InputDescriptor accepts (KiCI
// packages/engine/src/inputs/descriptor.ts `type`, see
// docs/kici-compatibility.md#lock-file).
type InputType string

// Input types of dispatch and schedule inputs.
const (
	// InputString accepts a string, optionally matching Pattern.
	InputString InputType = "string"
	// InputNumber accepts any number, optionally within Min and Max.
	InputNumber InputType = "number"
	// InputInteger accepts a whole number, optionally within Min and Max.
	InputInteger InputType = "integer"
	// InputBoolean accepts true or false.
	InputBoolean InputType = "boolean"
	// InputEnum accepts one of Values.
	InputEnum InputType = "enum"
	// InputLiteral accepts only Literal.
	InputLiteral InputType = "literal"
)
