package selector

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
)

// FieldError says which part of a selector or label set is invalid, and why.
type FieldError struct {
	// Field is the path of the offending part, named after the API's
	// LabelSelector fields, e.g. "match_labels[app]",
	// "match_expressions[2].values" or, from ValidateLabels, "labels[app]".
	Field string
	// Reason says what is wrong, e.g. "must not be empty".
	Reason string
}

// Error returns "selector: FIELD: REASON".
func (e *FieldError) Error() string {
	return "selector: " + e.Field + ": " + e.Reason
}

// Validate checks s with the rules of Kubernetes: keys and values of
// MatchLabels and expressions must be valid label keys and values, In and
// NotIn need at least one value, Exists and DoesNotExist need none, and the
// operator must be known. It returns the first problem as a *FieldError,
// looking at MatchLabels in key order and then at the expressions in order.
func (s Selector) Validate() error {
	if err := validateLabels("match_labels", s.MatchLabels); err != nil {
		return err
	}
	for i, r := range s.Expressions {
		if err := r.validate("match_expressions[" + strconv.Itoa(i) + "]"); err != nil {
			return err
		}
	}
	return nil
}

// ValidateLabels checks that every key and value of labels is a valid label
// key and value. It returns the first problem, in key order, as a
// *FieldError whose Field is "labels[KEY]".
func ValidateLabels(labels map[string]string) error {
	return validateLabels("labels", labels)
}

func validateLabels(field string, labels map[string]string) error {
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		f := field + "[" + k + "]"
		if p := keyProblem(k); p != "" {
			return &FieldError{Field: f, Reason: "invalid key: " + p}
		}
		if p := valueProblem(labels[k]); p != "" {
			return &FieldError{Field: f, Reason: fmt.Sprintf("invalid value %q: %s", labels[k], p)}
		}
	}
	return nil
}

// validate checks r, naming fields under path.
func (r Requirement) validate(path string) error {
	if p := keyProblem(r.Key); p != "" {
		return &FieldError{Field: path + ".key", Reason: fmt.Sprintf("invalid key %q: %s", r.Key, p)}
	}
	switch r.Operator {
	case In, NotIn:
		if len(r.Values) == 0 {
			return &FieldError{Field: path + ".values", Reason: "must not be empty for operator " + r.Operator.String()}
		}
	case Exists, DoesNotExist:
		if len(r.Values) != 0 {
			return &FieldError{Field: path + ".values", Reason: "must be empty for operator " + r.Operator.String()}
		}
	case 0:
		return &FieldError{Field: path + ".operator", Reason: "must be set"}
	default:
		return &FieldError{Field: path + ".operator", Reason: "unknown operator " + strconv.Itoa(int(r.Operator))}
	}
	for j, v := range r.Values {
		if p := valueProblem(v); p != "" {
			return &FieldError{
				Field:  path + ".values[" + strconv.Itoa(j) + "]",
				Reason: fmt.Sprintf("invalid value %q: %s", v, p),
			}
		}
	}
	return nil
}
