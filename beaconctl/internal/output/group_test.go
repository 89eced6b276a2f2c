package output

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

func TestGroupTable(t *testing.T) {
	var b bytes.Buffer
	err := GroupTable(&b, []*ipamv1.GlobalGroup{
		{
			Name: "pools/anycast/globalGroups/web", Addresses: []string{"198.51.100.64", "2001:db8::1"},
			Tenants: []string{"tenants/east", "tenants/west"},
			Members: []*ipamv1.GlobalGroupMember{
				{Allocation: "tenants/east/allocations/a1", Owner: "shop/web", Role: ipamv1.GlobalRole_GLOBAL_ROLE_ACTIVE},
				{Allocation: "tenants/west/allocations/a1", Owner: "shop/web", Role: ipamv1.GlobalRole_GLOBAL_ROLE_BACKUP},
			},
		},
		{Name: "pools/anycast/globalGroups/empty"},
	})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		got = append(got, strings.Join(strings.Fields(l), " "))
	}
	want := []string{
		"NAME ADDRESSES TENANTS MEMBERS CREATED",
		"pools/anycast/globalGroups/web 198.51.100.64,2001:db8::1 east,west 2 east:shop/web,west:shop/web (backup) -",
		"pools/anycast/globalGroups/empty - - 0 -",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("table (-want +got):\n%s", diff)
	}
}
