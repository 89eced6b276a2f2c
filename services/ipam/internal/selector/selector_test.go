package selector

import "testing"

func TestMatches(t *testing.T) {
	web := map[string]string{"app": "web", "tier": "front", "empty": ""}
	tests := []struct {
		name   string
		sel    Selector
		labels map[string]string
		want   bool
	}{
		{"empty selector, labels", Selector{}, web, true},
		{"empty selector, nil labels", Selector{}, nil, true},

		{"match_labels equal", Selector{MatchLabels: map[string]string{"app": "web"}}, web, true},
		{"match_labels differ", Selector{MatchLabels: map[string]string{"app": "db"}}, web, false},
		{"match_labels missing key", Selector{MatchLabels: map[string]string{"zone": "a"}}, web, false},
		{"match_labels empty value present", Selector{MatchLabels: map[string]string{"empty": ""}}, web, true},
		{"match_labels empty value absent", Selector{MatchLabels: map[string]string{"zone": ""}}, web, false},
		{"match_labels all must hold", Selector{MatchLabels: map[string]string{"app": "web", "tier": "back"}}, web, false},
		{"match_labels nil labels", Selector{MatchLabels: map[string]string{"app": "web"}}, nil, false},

		{"In hit", expr("app", In, "db", "web"), web, true},
		{"In miss", expr("app", In, "db"), web, false},
		{"In missing key", expr("zone", In, "a"), web, false},
		{"In empty value", expr("empty", In, ""), web, true},

		{"NotIn hit", expr("app", NotIn, "web"), web, false},
		{"NotIn miss", expr("app", NotIn, "db", "cache"), web, true},
		{"NotIn missing key", expr("zone", NotIn, "a"), web, true},
		{"NotIn nil labels", expr("zone", NotIn, "a"), nil, true},

		{"Exists present", expr("app", Exists), web, true},
		{"Exists empty value", expr("empty", Exists), web, true},
		{"Exists absent", expr("zone", Exists), web, false},

		{"DoesNotExist present", expr("app", DoesNotExist), web, false},
		{"DoesNotExist empty value", expr("empty", DoesNotExist), web, false},
		{"DoesNotExist absent", expr("zone", DoesNotExist), web, true},

		{"unknown operator never holds", expr("app", Operator(9), "web"), web, false},
		{"zero operator never holds", expr("app", 0), web, false},

		{
			"labels and expressions all hold",
			Selector{
				MatchLabels: map[string]string{"app": "web"},
				Expressions: []Requirement{{Key: "tier", Operator: In, Values: []string{"front"}}, {Key: "zone", Operator: DoesNotExist}},
			},
			web, true,
		},
		{
			"one expression fails",
			Selector{
				MatchLabels: map[string]string{"app": "web"},
				Expressions: []Requirement{{Key: "tier", Operator: In, Values: []string{"front"}}, {Key: "app", Operator: NotIn, Values: []string{"web"}}},
			},
			web, false,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.sel.Matches(tt.labels); got != tt.want {
				t.Errorf("%+v.Matches(%v) = %v, want %v", tt.sel, tt.labels, got, tt.want)
			}
		})
	}
}

func TestAnyMatches(t *testing.T) {
	labels := map[string]string{"team": "blue"}
	blue := Selector{MatchLabels: map[string]string{"team": "blue"}}
	red := Selector{MatchLabels: map[string]string{"team": "red"}}
	tests := []struct {
		name string
		sels []Selector
		want bool
	}{
		{"nil list", nil, true},
		{"empty list", []Selector{}, true},
		{"one matches", []Selector{red, blue}, true},
		{"none matches", []Selector{red}, false},
		{"empty selector in list", []Selector{red, {}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := AnyMatches(tt.sels, labels); got != tt.want {
				t.Errorf("AnyMatches(%v, %v) = %v, want %v", tt.sels, labels, got, tt.want)
			}
		})
	}
}

func TestOperatorString(t *testing.T) {
	for op, want := range map[Operator]string{
		In: "In", NotIn: "NotIn", Exists: "Exists", DoesNotExist: "DoesNotExist", 0: "Operator(0)", 7: "Operator(7)",
	} {
		if got := op.String(); got != want {
			t.Errorf("Operator(%d).String() = %q, want %q", int(op), got, want)
		}
	}
}

// expr returns a selector of one expression.
func expr(key string, op Operator, values ...string) Selector {
	return Selector{Expressions: []Requirement{{Key: key, Operator: op, Values: values}}}
}
