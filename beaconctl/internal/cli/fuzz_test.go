package cli

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

// FuzzFlagValues feeds arbitrary text to the parsers of beaconctl's flag
// values: --port, the selector flags, --node-priority, --label, --role,
// --family, --traffic-policy and --dual-stack. A refusal names the flag;
// what is accepted is a valid value that renders back to text parsing to
// the same value.
func FuzzFlagValues(f *testing.F) {
	f.Fuzz(func(t *testing.T, s string) {
		refused := func(err error, flag string) {
			t.Helper()
			if !strings.Contains(err.Error(), flag) {
				t.Fatalf("%q: error %q does not name %s", s, err, flag)
			}
		}

		if p, err := parsePort(s); err != nil {
			refused(err, "--port")
		} else {
			if p.GetPort() < 1 || p.GetPort() > 65535 {
				t.Fatalf("parsePort(%q) = %v", s, p)
			}
			proto := strings.ToLower(strings.TrimPrefix(p.GetProtocol().String(), "PROTOCOL_"))
			if again, err := parsePort(fmt.Sprintf("%d/%s", p.GetPort(), proto)); err != nil || !equal(again, p) {
				t.Fatalf("parsePort(%q) = %v does not render back: %v, %v", s, p, again, err)
			}
		}

		if sel, err := parseSelector("node-selector", s); err != nil {
			refused(err, "--node-selector")
		} else {
			var kvs []string
			for _, k := range slices.Sorted(maps.Keys(sel.GetMatchLabels())) {
				if k == "" || strings.TrimSpace(k) != k || strings.ContainsAny(k, ",=") {
					t.Fatalf("parseSelector(%q) key %q", s, k)
				}
				kvs = append(kvs, k+"="+sel.GetMatchLabels()[k])
			}
			if again, err := parseSelector("node-selector", strings.Join(kvs, ",")); err != nil || !equal(again, sel) {
				t.Fatalf("parseSelector(%q) = %v does not render back: %v, %v", s, sel, again, err)
			}
		}

		if nps, err := parseNodePriorities("node-priority", []string{s}); err != nil {
			refused(err, "--node-priority")
		} else {
			for _, np := range nps {
				if np.GetPriority() < 0 || np.GetNodeSelector() == nil {
					t.Fatalf("parseNodePriorities(%q) = %v", s, nps)
				}
			}
		}

		if m, err := parseLabels("label", []string{s}); err != nil {
			refused(err, "--label")
		} else if _, ok := m[""]; ok || len(m) != 1 {
			t.Fatalf("parseLabels(%q) = %v", s, m)
		}

		if r, err := parseRole(s); err != nil {
			refused(err, "--role")
		} else if _, ok := ipamv1.Role_name[int32(r)]; !ok || r == ipamv1.Role_ROLE_UNSPECIFIED {
			t.Fatalf("parseRole(%q) = %v", s, r)
		}
		if fam, err := parseFamily(s); err != nil {
			refused(err, "--family")
		} else if fam != ipamv1.IPFamily_IP_FAMILY_IPV4 && fam != ipamv1.IPFamily_IP_FAMILY_IPV6 {
			t.Fatalf("parseFamily(%q) = %v", s, fam)
		}
		if tp, err := parseTrafficPolicy(s); err != nil {
			refused(err, "--traffic-policy")
		} else if tp == ipamv1.TrafficPolicy_TRAFFIC_POLICY_UNSPECIFIED {
			t.Fatalf("parseTrafficPolicy(%q) = %v", s, tp)
		}
		if ds, err := parseDualStack(s); err != nil {
			refused(err, "--dual-stack")
		} else if ds == ipamv1.IPFamilyPolicy_IP_FAMILY_POLICY_UNSPECIFIED || ds == ipamv1.IPFamilyPolicy_IP_FAMILY_POLICY_SINGLE_STACK {
			t.Fatalf("parseDualStack(%q) = %v", s, ds)
		}
	})
}

func equal(a, b proto.Message) bool { return proto.Equal(a, b) }

// FuzzRangeKey checks the canonical form beaconctl compares ranges by
// (--add-range, --remove-range): it is idempotent, and a range written in
// another case or with blanks around it or its dash has the same key.
func FuzzRangeKey(f *testing.F) {
	f.Fuzz(func(t *testing.T, s string) {
		k := rangeKey(s)
		if again := rangeKey(k); again != k {
			t.Fatalf("rangeKey(%q) = %q, but rangeKey(%q) = %q", s, k, k, again)
		}
		if k != strings.TrimSpace(s) && !strings.ContainsAny(s, "%") {
			// s parsed: the same range in upper case, with blanks, keys
			// the same.
			if u := rangeKey(" " + strings.ToUpper(s) + " "); u != k {
				t.Fatalf("rangeKey(%q) = %q, but in upper case %q", s, k, u)
			}
		}
	})
}

// FuzzResourceRefs checks how beaconctl reads the names of allocations and
// tenant-scoped resources given on its command line, with or without
// --tenant: what it accepts is a full name of the right form, in the
// tenant given, and a refusal says so.
func FuzzResourceRefs(f *testing.F) {
	f.Fuzz(func(t *testing.T, arg, tenant string) {
		if ref, err := parseAllocationRef(arg, tenant); err == nil {
			parent, ok := splitAllocationName(ref.Name)
			if !ok {
				t.Fatalf("parseAllocationRef(%q, %q) = %+v: not an allocation name", arg, tenant, ref)
			}
			if tenant != "" {
				if want, _ := tenantParent(tenant); parent != want {
					t.Fatalf("parseAllocationRef(%q, %q) = %+v: not in the tenant", arg, tenant, ref)
				}
			}
			if ref.Owner != "" && (ref.Owner != arg || ref.Parent != parent || !strings.HasSuffix(ref.Name, "/"+allocationIDForOwner(arg))) {
				t.Fatalf("parseAllocationRef(%q, %q) = %+v", arg, tenant, ref)
			}
		}
		const coll = "bgpPeers"
		if ref, err := parseConfigRef(coll, arg, tenant); err == nil {
			if ref.ID == "" || strings.Contains(ref.ID, "/") || ref.Name != ref.Parent+"/"+coll+"/"+ref.ID {
				t.Fatalf("parseConfigRef(%q, %q) = %+v", arg, tenant, ref)
			}
			if p, err := tenantParent(ref.Parent); err != nil || p != ref.Parent || p == "tenants/-" {
				t.Fatalf("parseConfigRef(%q, %q) = %+v: bad parent", arg, tenant, ref)
			}
			if tenant != "" {
				if want, _ := tenantParent(tenant); ref.Parent != want {
					t.Fatalf("parseConfigRef(%q, %q) = %+v: not in the tenant", arg, tenant, ref)
				}
			}
		}
	})
}
