package spiffeid

import (
	"errors"
	"testing"
)

// FuzzID goes further than FuzzParse: it also builds IDs from arbitrary
// parts. A refusal of Parse wraps ErrInvalid and gives no ID; an accepted
// ID is valid, is exactly its canonical String, and its URL (what
// certificates carry) parses back to it; any valid ID round-trips through
// String and URL.
func FuzzID(f *testing.F) {
	f.Fuzz(func(t *testing.T, s, td, role, tenant, name string) {
		id, err := Parse(s)
		if err != nil {
			if !errors.Is(err, ErrInvalid) || id != (ID{}) {
				t.Fatalf("Parse(%q) = %+v, %v; want ErrInvalid and no ID", s, id, err)
			}
		} else {
			if verr := id.Validate(); verr != nil || id.String() != s {
				t.Fatalf("Parse(%q) = %+v: Validate %v, String %q", s, id, verr, id.String())
			}
			if again, err := Parse(id.URL().String()); err != nil || again != id {
				t.Fatalf("Parse(%q) = %+v, but its URL %q gives %+v, %v", s, id, id.URL(), again, err)
			}
		}
		built := ID{TrustDomain: td, Role: Role(role), Tenant: tenant, Name: name}
		if built.Validate() != nil {
			return
		}
		for _, text := range []string{built.String(), built.URL().String()} {
			if again, err := Parse(text); err != nil || again != built {
				t.Fatalf("%+v written as %q parses as %+v, %v", built, text, again, err)
			}
		}
	})
}
