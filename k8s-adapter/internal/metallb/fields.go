package metallb

import (
	"fmt"
	"math"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

// reader reads typed fields out of an unstructured spec, collecting every
// problem with the field's path instead of stopping at the first.
type reader struct {
	errs []string
}

func (r *reader) fail(path, format string, args ...any) {
	r.errs = append(r.errs, path+": "+fmt.Sprintf(format, args...))
}

func (r *reader) err() error {
	if len(r.errs) == 0 {
		return nil
	}
	return &SpecError{Problems: r.errs}
}

// SpecError lists what is wrong with a resource's spec.
type SpecError struct {
	Problems []string
}

func (e *SpecError) Error() string { return strings.Join(e.Problems, "; ") }

func (r *reader) str(m map[string]any, path, key string) string {
	v, ok := m[key]
	if !ok || v == nil {
		return ""
	}
	s, ok := v.(string)
	if !ok {
		r.fail(path+"."+key, "must be a string")
	}
	return s
}

func (r *reader) strs(m map[string]any, path, key string) []string {
	v, ok := m[key]
	if !ok || v == nil {
		return nil
	}
	list, ok := v.([]any)
	if !ok {
		r.fail(path+"."+key, "must be a list of strings")
		return nil
	}
	out := make([]string, 0, len(list))
	for i, e := range list {
		s, ok := e.(string)
		if !ok {
			r.fail(fmt.Sprintf("%s.%s[%d]", path, key, i), "must be a string")
			continue
		}
		out = append(out, s)
	}
	return out
}

func (r *reader) boolean(m map[string]any, path, key string) (val, set bool) {
	v, ok := m[key]
	if !ok || v == nil {
		return false, false
	}
	b, ok := v.(bool)
	if !ok {
		r.fail(path+"."+key, "must be a boolean")
	}
	return b, true
}

// integer reads a whole number in [lo, hi].
func (r *reader) integer(m map[string]any, path, key string, lo, hi int64) (val int64, set bool) {
	v, ok := m[key]
	if !ok || v == nil {
		return 0, false
	}
	var n int64
	switch x := v.(type) {
	case int64:
		n = x
	case int:
		n = int64(x)
	case int32:
		n = int64(x)
	case float64:
		if x != math.Trunc(x) || math.IsInf(x, 0) {
			r.fail(path+"."+key, "must be a whole number")
			return 0, false
		}
		if x < -(1<<63) || x >= 1<<63 {
			// Beyond int64: converting would wrap (and differs by CPU).
			r.fail(path+"."+key, "must be from %d to %d", lo, hi)
			return 0, false
		}
		n = int64(x)
	default:
		r.fail(path+"."+key, "must be a number")
		return 0, false
	}
	if n < lo || n > hi {
		r.fail(path+"."+key, "must be from %d to %d", lo, hi)
		return 0, false
	}
	return n, true
}

func (r *reader) object(m map[string]any, path, key string) map[string]any {
	v, ok := m[key]
	if !ok || v == nil {
		return nil
	}
	o, ok := v.(map[string]any)
	if !ok {
		r.fail(path+"."+key, "must be an object")
	}
	return o
}

func (r *reader) objects(m map[string]any, path, key string) []map[string]any {
	v, ok := m[key]
	if !ok || v == nil {
		return nil
	}
	list, ok := v.([]any)
	if !ok {
		r.fail(path+"."+key, "must be a list of objects")
		return nil
	}
	out := make([]map[string]any, 0, len(list))
	for i, e := range list {
		o, ok := e.(map[string]any)
		if !ok {
			r.fail(fmt.Sprintf("%s.%s[%d]", path, key, i), "must be an object")
			continue
		}
		out = append(out, o)
	}
	return out
}

// duration reads a Kubernetes metav1.Duration ("90s", "1m30s").
func (r *reader) duration(m map[string]any, path, key string) *durationpb.Duration {
	s := r.str(m, path, key)
	if s == "" {
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		r.fail(path+"."+key, "%q is not a duration", s)
		return nil
	}
	return durationpb.New(d)
}

// millis reads a number of milliseconds.
func (r *reader) millis(m map[string]any, path, key string, lo, hi int64) *durationpb.Duration {
	n, ok := r.integer(m, path, key, lo, hi)
	if !ok {
		return nil
	}
	return durationpb.New(time.Duration(n) * time.Millisecond)
}

var operators = map[string]ipamv1.LabelSelectorRequirement_Operator{
	"In":           ipamv1.LabelSelectorRequirement_OPERATOR_IN,
	"NotIn":        ipamv1.LabelSelectorRequirement_OPERATOR_NOT_IN,
	"Exists":       ipamv1.LabelSelectorRequirement_OPERATOR_EXISTS,
	"DoesNotExist": ipamv1.LabelSelectorRequirement_OPERATOR_DOES_NOT_EXIST,
}

// selectors reads a list of Kubernetes label selectors.
func (r *reader) selectors(m map[string]any, path, key string) []*ipamv1.LabelSelector {
	var out []*ipamv1.LabelSelector
	for i, o := range r.objects(m, path, key) {
		p := fmt.Sprintf("%s.%s[%d]", path, key, i)
		sel := &ipamv1.LabelSelector{}
		if ml := r.object(o, p, "matchLabels"); len(ml) > 0 {
			sel.MatchLabels = map[string]string{}
			for k, v := range ml {
				s, ok := v.(string)
				if !ok {
					r.fail(p+".matchLabels."+k, "must be a string")
					continue
				}
				sel.MatchLabels[k] = s
			}
		}
		for j, e := range r.objects(o, p, "matchExpressions") {
			ep := fmt.Sprintf("%s.matchExpressions[%d]", p, j)
			op, ok := operators[r.str(e, ep, "operator")]
			if !ok {
				r.fail(ep+".operator", "must be In, NotIn, Exists or DoesNotExist")
				continue
			}
			sel.MatchExpressions = append(sel.MatchExpressions, &ipamv1.LabelSelectorRequirement{
				Key: r.str(e, ep, "key"), Operator: op, Values: r.strs(e, ep, "values"),
			})
		}
		out = append(out, sel)
	}
	return out
}
