package lockfile

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"kici.dev/kici/internal/trigger/pattern"
)

// InputDescriptor types one dispatch or schedule input (KiCI
// packages/engine/src/inputs/descriptor.ts): type is string, number,
// integer, boolean, enum or literal.
type InputDescriptor struct {
	Type        InputType `json:"type"`
	Optional    bool      `json:"optional"`
	Nullable    bool      `json:"nullable"`
	Default     any       `json:"-"`
	HasDefault  bool      `json:"-"`
	Values      []string  `json:"values,omitempty"`
	Literal     any       `json:"literal,omitempty"`
	Min         *float64  `json:"min,omitempty"`
	Max         *float64  `json:"max,omitempty"`
	Pattern     string    `json:"pattern,omitempty"`
	Description string    `json:"description,omitempty"`
}

// MarshalJSON writes `default` only when one was given (null is a valid
// default of a nullable input).
func (d InputDescriptor) MarshalJSON() ([]byte, error) {
	type plain InputDescriptor
	b, err := json.Marshal(plain(d))
	if err != nil || !d.HasDefault {
		return b, err
	}
	def, err := json.Marshal(d.Default)
	if err != nil {
		return nil, err
	}
	return append(append(b[:len(b)-1], `,"default":`...), append(def, '}')...), nil
}

// UnmarshalJSON reads `default` and notes its presence.
func (d *InputDescriptor) UnmarshalJSON(b []byte) error {
	type plain InputDescriptor
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	*d = InputDescriptor(p)
	if def, ok := raw["default"]; ok {
		d.HasDefault = true
		if err := json.Unmarshal(def, &d.Default); err != nil {
			return err
		}
	}
	return nil
}

// Coerce validates v (a decoded JSON value or a string typed by an
// operator, e.g. `--input n=3`) against d and returns the typed value:
// strings become numbers/booleans where the type asks for them; min/max
// bound numbers (and string lengths); pattern (a JS regex) must match a
// string; enum values must be listed.
func (d *InputDescriptor) Coerce(v any) (any, error) {
	if v == nil {
		if d.Nullable {
			return nil, nil
		}
		return nil, fmt.Errorf("must not be null")
	}
	switch d.Type {
	case InputString:
		s, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("must be a string")
		}
		n := float64(len([]rune(s)))
		if d.Min != nil && n < *d.Min || d.Max != nil && n > *d.Max {
			return nil, fmt.Errorf("length %d out of range", int(n))
		}
		if d.Pattern != "" {
			re, err := pattern.CompileRegex(d.Pattern, "")
			if err != nil {
				return nil, err
			}
			if !re.MatchString(s) {
				return nil, fmt.Errorf("%q does not match /%s/", s, d.Pattern)
			}
		}
		return s, nil
	case InputNumber, InputInteger:
		var f float64
		switch x := v.(type) {
		case float64:
			f = x
		case int:
			f = float64(x)
		case int64:
			f = float64(x)
		case uint64:
			f = float64(x)
		case string:
			p, err := strconv.ParseFloat(strings.TrimSpace(x), 64)
			if err != nil {
				return nil, fmt.Errorf("%q is not a number", x)
			}
			f = p
		default:
			return nil, fmt.Errorf("must be a number")
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, fmt.Errorf("must be a finite number")
		}
		if d.Type == InputInteger && f != math.Trunc(f) {
			return nil, fmt.Errorf("%v is not an integer", f)
		}
		if d.Min != nil && f < *d.Min || d.Max != nil && f > *d.Max {
			return nil, fmt.Errorf("%v out of range", f)
		}
		return f, nil
	case InputBoolean:
		switch x := v.(type) {
		case bool:
			return x, nil
		case string:
			if b, err := strconv.ParseBool(x); err == nil {
				return b, nil
			}
		}
		return nil, fmt.Errorf("must be true or false")
	case InputEnum:
		s, ok := v.(string)
		if !ok || !slices.Contains(d.Values, s) {
			return nil, fmt.Errorf("must be one of %s", strings.Join(d.Values, ", "))
		}
		return s, nil
	case InputLiteral:
		if fmt.Sprint(v) != fmt.Sprint(d.Literal) {
			return nil, fmt.Errorf("must be %v", d.Literal)
		}
		return d.Literal, nil
	}
	return nil, fmt.Errorf("unknown input type %q", d.Type)
}

// ResolveInputs validates given inputs against a trigger's raw `inputs`
// descriptors and fills defaults: unknown names, invalid values and missing
// required inputs are errors (all of them, sorted by name). The result maps
// every known input that has a value or default to its typed value.
func ResolveInputs(descriptors json.RawMessage, given map[string]any) (map[string]any, error) {
	ds := map[string]InputDescriptor{}
	if len(descriptors) > 0 && string(descriptors) != "null" {
		if err := json.Unmarshal(descriptors, &ds); err != nil {
			return nil, fmt.Errorf("inputs: invalid descriptors: %v", err)
		}
	}
	out := map[string]any{}
	var errs []string
	for name, v := range given {
		d, ok := ds[name]
		if !ok {
			errs = append(errs, fmt.Sprintf("input %q is not declared", name))
			continue
		}
		cv, err := d.Coerce(v)
		if err != nil {
			errs = append(errs, fmt.Sprintf("input %q: %v", name, err))
			continue
		}
		out[name] = cv
	}
	for name, d := range ds {
		if _, ok := given[name]; ok {
			continue
		}
		switch {
		case d.HasDefault:
			cv, err := d.Coerce(d.Default)
			if err != nil {
				errs = append(errs, fmt.Sprintf("input %q: default: %v", name, err))
				continue
			}
			out[name] = cv
		case !d.Optional:
			errs = append(errs, fmt.Sprintf("input %q is required", name))
		}
	}
	if len(errs) > 0 {
		sort.Strings(errs)
		return nil, fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return out, nil
}

// declaredInputs returns every input the workflow's triggers declare (a
// dispatch and a schedule trigger may declare the same name: the first
// declaration wins).
func declaredInputs(ts []Trigger) map[string]InputDescriptor {
	out := map[string]InputDescriptor{}
	for _, t := range ts {
		if len(t.Inputs) == 0 {
			continue
		}
		var ds map[string]InputDescriptor
		if json.Unmarshal(t.Inputs, &ds) != nil {
			continue
		}
		for name, d := range ds {
			if _, seen := out[name]; !seen {
				out[name] = d
			}
		}
	}
	return out
}

// InputDefaults returns the inputs of a run that provides none (a push, a
// pull request, a tag): every input the workflow's dispatch and schedule
// triggers declare, with its declared default, or without one the zero
// value of its type (0, "", false; nil when nullable), typed as a manual
// run's values are. A condition such as `inputs.repeat > 2` then means the
// same on every run. Nil when the workflow declares no inputs.
func InputDefaults(wf *Workflow) map[string]any {
	ds := declaredInputs(wf.Triggers)
	if len(ds) == 0 {
		return nil
	}
	out := make(map[string]any, len(ds))
	for name, d := range ds {
		if d.HasDefault {
			if v, err := d.Coerce(d.Default); err == nil {
				out[name] = v
				continue
			}
		}
		out[name] = d.zero()
	}
	return out
}

// zero is the value of an input that has no value and no default.
func (d *InputDescriptor) zero() any {
	if d.Nullable {
		return nil
	}
	switch d.Type {
	case InputNumber, InputInteger:
		return 0.0
	case InputBoolean:
		return false
	case InputLiteral:
		return d.Literal
	}
	return "" // string, enum
}

// InputTypes maps every input the workflow's triggers declare to its type
// (string, number, integer, boolean, enum, literal), "" for a nullable
// input (its value may be null), for type-checking conditions.
func InputTypes(ts []Trigger) map[string]string {
	out := map[string]string{}
	for name, d := range declaredInputs(ts) {
		if d.Nullable {
			out[name] = ""
			continue
		}
		out[name] = string(d.Type)
	}
	return out
}

// WithInputDefaults returns given over InputDefaults(wf): the values a run
// was given (by its trigger, its caller or a schedule), and for every
// other input the workflow declares its default or its type's zero value,
// so every declared input has a typed value in every run.
func WithInputDefaults(wf *Workflow, given map[string]any) map[string]any {
	out := InputDefaults(wf)
	if out == nil && len(given) == 0 {
		return given
	}
	if out == nil {
		out = map[string]any{}
	}
	for k, v := range given {
		out[k] = v
	}
	return out
}
