package planner

import (
	"errors"
	"strings"
	"testing"

	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

// FuzzCommunityLiteral checks how the planner reads a community written in
// a BGPAdvertisement or an alias: a literal with ':' is parsed by the ipam
// parsers (large:A:B:C or A:B) and either gives their value or is
// ReasonInvalidCommunity; a word without ':' is an alias the tenant has
// not defined (ReasonUnknownCommunityAlias); nothing else comes out.
func FuzzCommunityLiteral(f *testing.F) {
	f.Fuzz(func(t *testing.T, s string) {
		v, reason, err := parseCommunity(s)
		switch {
		case ipam.IsLargeCommunity(s):
			lg, perr := ipam.ParseLargeCommunity(s)
			if (err == nil) != (perr == nil) || err == nil && (!v.large || v.lg != lg || reason != "") || err != nil && reason != ReasonInvalidCommunity {
				t.Fatalf("parseCommunity(%q) = %+v, %q, %v; ParseLargeCommunity: %v, %v", s, v, reason, err, lg, perr)
			}
		case !strings.Contains(s, ":"):
			if !errors.Is(err, ErrUnknownCommunityAlias) || reason != ReasonUnknownCommunityAlias {
				t.Fatalf("parseCommunity(%q) = %+v, %q, %v; want an unknown alias", s, v, reason, err)
			}
		default:
			std, perr := ipam.ParseStandardCommunity(s)
			if (err == nil) != (perr == nil) || err == nil && (v.large || v.std != std || reason != "") || err != nil && reason != ReasonInvalidCommunity {
				t.Fatalf("parseCommunity(%q) = %+v, %q, %v; ParseStandardCommunity: %v, %v", s, v, reason, err, std, perr)
			}
		}
		if err != nil && !errors.Is(err, ipam.ErrInvalidCommunity) && !errors.Is(err, ErrUnknownCommunityAlias) {
			t.Fatalf("parseCommunity(%q) error %v wraps no sentinel", s, err)
		}
	})
}
