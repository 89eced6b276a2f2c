package spiffeid

import (
	"crypto/x509"
	"errors"
	"net/url"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want ID
		ok   bool
	}{
		{"spiffe://beacon/gateway", ID{TrustDomain: "beacon", Role: Gateway}, true},
		{"spiffe://beacon/admin/alice", ID{TrustDomain: "beacon", Role: Admin, Name: "alice"}, true},
		{"spiffe://beacon/tenant/c1/announcer/node-1.dc", ID{TrustDomain: "beacon", Role: Announcer, Tenant: "c1", Name: "node-1.dc"}, true},
		{"spiffe://example.org/tenant/c1/adapter/prod", ID{TrustDomain: "example.org", Role: Adapter, Tenant: "c1", Name: "prod"}, true},
		{"spiffe://beacon/admin", ID{}, false},
		{"spiffe://beacon/gateway/x", ID{}, false},
		{"spiffe://beacon/tenant/c1/announcer", ID{}, false},
		{"spiffe://beacon/tenant/c1/viewer/x", ID{}, false},
		{"spiffe://beacon/tenant/C1/announcer/n", ID{}, false},
		{"spiffe://beacon/tenant/../announcer/n", ID{}, false},
		{"spiffe://beacon/tenant/c1/announcer/n?x=1", ID{}, false},
		{"spiffe://beacon:443/gateway", ID{}, false},
		{"spiffe://u@beacon/gateway", ID{}, false},
		{"spiffe://beacon//gateway", ID{}, false},
		{"beacon://admin", ID{}, false},
		{"", ID{}, false},
	} {
		got, err := Parse(tc.in)
		if (err == nil) != tc.ok {
			t.Errorf("Parse(%q): error %v, want ok=%v", tc.in, err, tc.ok)
			continue
		}
		if err != nil && !errors.Is(err, ErrInvalid) {
			t.Errorf("Parse(%q): %v does not wrap ErrInvalid", tc.in, err)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("Parse(%q) (-want +got):\n%s", tc.in, diff)
		}
		if tc.ok && got.String() != tc.in {
			t.Errorf("String() = %q, want %q", got.String(), tc.in)
		}
	}
}

func TestFromCert(t *testing.T) {
	u := func(s string) *url.URL { v, _ := url.Parse(s); return v }
	for _, tc := range []struct {
		name string
		uris []*url.URL
		ok   bool
	}{
		{"one", []*url.URL{u("spiffe://beacon/gateway")}, true},
		{"other uris ignored", []*url.URL{u("https://example.com"), u("spiffe://beacon/gateway")}, true},
		{"none", nil, false},
		{"two", []*url.URL{u("spiffe://beacon/gateway"), u("spiffe://beacon/admin/a")}, false},
		{"other trust domain", []*url.URL{u("spiffe://other/gateway")}, false},
	} {
		_, err := FromCert(&x509.Certificate{URIs: tc.uris}, "beacon")
		if (err == nil) != tc.ok {
			t.Errorf("%s: %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"spiffe://beacon/gateway", "spiffe://beacon/tenant/c1/announcer/n", "spiffe://b/admin/a"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := Parse(s)
		if err != nil {
			return
		}
		if id.String() != s {
			t.Fatalf("accepted %q, canonical %q", s, id.String())
		}
		if again, err := Parse(id.URL().String()); err != nil || again != id {
			t.Fatalf("URL() %q does not parse back: %v", id.URL(), err)
		}
	})
}
