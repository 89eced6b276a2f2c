package cli

import (
	"maps"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

func TestPoolName(t *testing.T) {
	tests := []struct {
		in, want string
		wantErr  bool
	}{
		{in: "web", want: "pools/web"},
		{in: "pools/web", want: "pools/web"},
		{in: "", wantErr: true},
		{in: "pools/", wantErr: true},
		{in: "a/b", wantErr: true},
		{in: "pools/a/b", wantErr: true},
	}
	for _, tt := range tests {
		got, err := poolName(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("poolName(%q) = %q, %v; want %q, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestTenantParent(t *testing.T) {
	tests := []struct {
		in, want string
		wantErr  bool
	}{
		{in: "acme", want: "tenants/acme"},
		{in: "tenants/acme", want: "tenants/acme"},
		{in: "-", want: "tenants/-"},
		{in: "", wantErr: true},
		{in: "acme/x", wantErr: true},
	}
	for _, tt := range tests {
		got, err := tenantParent(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("tenantParent(%q) = %q, %v; want %q, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestParseAllocationRef(t *testing.T) {
	tests := []struct {
		arg, tenant string
		want        allocationRef
		wantErr     bool
	}{
		{arg: webName, want: allocationRef{Name: webName}},
		{arg: webName, tenant: "acme", want: allocationRef{Name: webName}},
		{arg: webName, tenant: "lab", wantErr: true},
		{arg: "default/web", tenant: "acme", want: allocationRef{Name: webName, Parent: "tenants/acme", Owner: "default/web"}},
		{arg: "machine-42", tenant: "tenants/lab", want: allocationRef{Name: labName, Parent: "tenants/lab", Owner: "machine-42"}},
		{arg: "default/web", wantErr: true},
		{arg: "tenants/acme/allocations/", wantErr: true},
		{arg: "x", tenant: "-", wantErr: true},
		{arg: "", tenant: "acme", wantErr: true},
	}
	for _, tt := range tests {
		got, err := parseAllocationRef(tt.arg, tt.tenant)
		if (err != nil) != tt.wantErr {
			t.Errorf("parseAllocationRef(%q, %q): error %v, want error %v", tt.arg, tt.tenant, err, tt.wantErr)
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("parseAllocationRef(%q, %q) (-want +got):\n%s", tt.arg, tt.tenant, diff)
		}
	}
}

func TestParsePort(t *testing.T) {
	tests := []struct {
		in      string
		want    *ipamv1.Port
		wantErr bool
	}{
		{in: "80", want: &ipamv1.Port{Port: 80, Protocol: ipamv1.Protocol_PROTOCOL_TCP}},
		{in: "80/tcp", want: &ipamv1.Port{Port: 80, Protocol: ipamv1.Protocol_PROTOCOL_TCP}},
		{in: "53/UDP", want: &ipamv1.Port{Port: 53, Protocol: ipamv1.Protocol_PROTOCOL_UDP}},
		{in: "65535/sctp", want: &ipamv1.Port{Port: 65535, Protocol: ipamv1.Protocol_PROTOCOL_SCTP}},
		{in: "0", wantErr: true},
		{in: "65536", wantErr: true},
		{in: "http", wantErr: true},
		{in: "80/", wantErr: true},
		{in: "80/quic", wantErr: true},
	}
	for _, tt := range tests {
		got, err := parsePort(tt.in)
		if (err != nil) != tt.wantErr {
			t.Errorf("parsePort(%q): error %v, want error %v", tt.in, err, tt.wantErr)
			continue
		}
		if diff := cmp.Diff(tt.want, got, protocmp.Transform()); diff != "" {
			t.Errorf("parsePort(%q) (-want +got):\n%s", tt.in, diff)
		}
	}
}

func TestApplyLabelEdits(t *testing.T) {
	tests := []struct {
		name    string
		labels  map[string]string
		edits   []string
		want    map[string]string
		wantErr bool
	}{
		{name: "set on nil", edits: []string{"a=1"}, want: map[string]string{"a": "1"}},
		{name: "set, override, remove", labels: map[string]string{"a": "1", "b": "2"}, edits: []string{"a=3", "b-", "c=x=y"}, want: map[string]string{"a": "3", "c": "x=y"}},
		{name: "remove absent", labels: map[string]string{"a": "1"}, edits: []string{"z-"}, want: map[string]string{"a": "1"}},
		{name: "remove all", labels: map[string]string{"a": "1"}, edits: []string{"a-"}, want: map[string]string{}},
		{name: "no value", edits: []string{"a"}, wantErr: true},
		{name: "no key", edits: []string{"=1"}, wantErr: true},
		{name: "bare dash", edits: []string{"-"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			orig := maps.Clone(tt.labels)
			got, err := applyLabelEdits("label", tt.labels, tt.edits)
			if (err != nil) != tt.wantErr {
				t.Fatalf("error %v, want error %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("labels (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(orig, tt.labels); diff != "" {
				t.Errorf("the input changed (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEditRanges(t *testing.T) {
	current := []string{"192.0.2.0/24", "2001:db8::/64", "198.51.100.10-198.51.100.20"}
	tests := []struct {
		name        string
		add, remove []string
		want        []string
		wantErr     bool
	}{
		{name: "add", add: []string{"203.0.113.0/24"}, want: append(append([]string{}, current...), "203.0.113.0/24")},
		{name: "add present", add: []string{"2001:0db8::/64"}, want: current},
		{name: "remove range form", remove: []string{"198.51.100.10 - 198.51.100.20"}, want: current[:2]},
		{name: "remove then add", remove: []string{"192.0.2.0/24"}, add: []string{"192.0.2.0/25"}, want: []string{"2001:db8::/64", "198.51.100.10-198.51.100.20", "192.0.2.0/25"}},
		{name: "remove absent", remove: []string{"192.0.2.0/25"}, wantErr: true},
		{name: "unparsable compared as text", add: []string{"junk"}, want: append(append([]string{}, current...), "junk")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := append([]string{}, current...)
			got, err := editRanges(in, tt.add, tt.remove)
			if (err != nil) != tt.wantErr {
				t.Fatalf("error %v, want error %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ranges (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(current, in); diff != "" {
				t.Errorf("the input changed (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseFamilyAndDualStack(t *testing.T) {
	for in, want := range map[string]ipamv1.IPFamily{"ipv4": ipamv1.IPFamily_IP_FAMILY_IPV4, "IPv6": ipamv1.IPFamily_IP_FAMILY_IPV6, "4": ipamv1.IPFamily_IP_FAMILY_IPV4} {
		if got, err := parseFamily(in); err != nil || got != want {
			t.Errorf("parseFamily(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := parseFamily("ipx"); err == nil {
		t.Error("parseFamily(ipx) succeeded")
	}
	for in, want := range map[string]ipamv1.IPFamilyPolicy{"require": ipamv1.IPFamilyPolicy_IP_FAMILY_POLICY_REQUIRE_DUAL_STACK, "Prefer": ipamv1.IPFamilyPolicy_IP_FAMILY_POLICY_PREFER_DUAL_STACK} {
		if got, err := parseDualStack(in); err != nil || got != want {
			t.Errorf("parseDualStack(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := parseDualStack("single"); err == nil {
		t.Error("parseDualStack(single) succeeded")
	}
}

func TestParseSelectors(t *testing.T) {
	tests := []struct {
		vals    []string
		want    []*ipamv1.LabelSelector
		wantErr string
	}{
		{vals: []string{"zone=a"}, want: []*ipamv1.LabelSelector{{MatchLabels: map[string]string{"zone": "a"}}}},
		{vals: []string{"zone=a,role=edge", " rack = r1 "}, want: []*ipamv1.LabelSelector{
			{MatchLabels: map[string]string{"zone": "a", "role": "edge"}},
			{MatchLabels: map[string]string{"rack": "r1"}},
		}},
		{vals: []string{"k=a=b,e="}, want: []*ipamv1.LabelSelector{{MatchLabels: map[string]string{"k": "a=b", "e": ""}}}},
		{vals: []string{""}, want: nil},
		{vals: []string{"a=1", ""}, wantErr: `--node-selector "": want KEY=VALUE`},
		{vals: []string{"a"}, wantErr: `--node-selector "a": want KEY=VALUE`},
		{vals: []string{"=1"}, wantErr: "want KEY=VALUE"},
		{vals: []string{"a=1,"}, wantErr: "want KEY=VALUE"},
		{vals: []string{"a=1,a=1"}, wantErr: "label a given twice"},
	}
	for _, tt := range tests {
		got, err := parseSelectors("node-selector", tt.vals)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("parseSelectors(%q): error %v, want one containing %q", tt.vals, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("parseSelectors(%q): %v", tt.vals, err)
			continue
		}
		if diff := cmp.Diff(tt.want, got, protocmp.Transform()); diff != "" {
			t.Errorf("parseSelectors(%q) (-want +got):\n%s", tt.vals, diff)
		}
	}
}

func TestParseNodePriorities(t *testing.T) {
	got, err := parseNodePriorities("node-priority", []string{"1:rack=r1,zone=a", " 0 :", "20:x=y"})
	want := []*ipamv1.NodePriority{
		{Priority: 1, NodeSelector: &ipamv1.LabelSelector{MatchLabels: map[string]string{"rack": "r1", "zone": "a"}}},
		{Priority: 0, NodeSelector: &ipamv1.LabelSelector{}},
		{Priority: 20, NodeSelector: &ipamv1.LabelSelector{MatchLabels: map[string]string{"x": "y"}}},
	}
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("parseNodePriorities (-want +got):\n%s", diff)
	}
	if got, err := parseNodePriorities("node-priority", []string{""}); err != nil || got != nil {
		t.Errorf(`parseNodePriorities("") = %v, %v; want none`, got, err)
	}
	for _, bad := range []string{"1", "a:x=y", "-1:x=y", "1:x", "99999999999:x=y"} {
		if _, err := parseNodePriorities("node-priority", []string{bad}); err == nil {
			t.Errorf("parseNodePriorities(%q) succeeded", bad)
		}
	}
}

func TestEditAliases(t *testing.T) {
	current := []*ipamv1.CommunityAlias{{Name: "a", Value: "1:1"}, {Name: "b", Value: "1:2"}}
	tests := []struct {
		name     string
		edits    []string
		removals bool
		want     []*ipamv1.CommunityAlias
		wantErr  bool
	}{
		{name: "change in place, append, remove", edits: []string{"a=9:9", "c=large:1:2:3", "b-"}, removals: true, want: []*ipamv1.CommunityAlias{{Name: "a", Value: "9:9"}, {Name: "c", Value: "large:1:2:3"}}},
		{name: "remove absent", edits: []string{"z-"}, removals: true, want: current},
		{name: "removal not allowed", edits: []string{"a-"}, wantErr: true},
		{name: "no value", edits: []string{"a="}, removals: true, wantErr: true},
		{name: "no name", edits: []string{"=1:1"}, removals: true, wantErr: true},
		{name: "bare name", edits: []string{"a"}, removals: true, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := proto.Clone(&ipamv1.Community{Aliases: current})
			got, err := editAliases("alias", current, tt.edits, tt.removals)
			if (err != nil) != tt.wantErr {
				t.Fatalf("error %v, want error %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got, protocmp.Transform()); !tt.wantErr && diff != "" {
				t.Errorf("aliases (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, &ipamv1.Community{Aliases: current}, protocmp.Transform()); diff != "" {
				t.Errorf("the input changed (-want +got):\n%s", diff)
			}
		})
	}
}
