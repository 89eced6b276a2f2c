package cli

import "testing"

func TestGroupName(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"anycast/web", "pools/anycast/globalGroups/web"},
		{"pools/anycast/globalGroups/web", "pools/anycast/globalGroups/web"},
		{"web", ""},
		{"anycast/", ""},
		{"a/b/c", ""},
		{"pools/anycast/web", ""},
		{"pools/anycast/globalGroups/", ""},
	} {
		got, err := groupName(tc.in)
		if got != tc.want || (err != nil) != (tc.want == "") {
			t.Errorf("groupName(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}
