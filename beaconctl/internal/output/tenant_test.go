package output

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

func TestTenantTable(t *testing.T) {
	var b bytes.Buffer
	err := TenantTable(&b, []*ipamv1.Tenant{
		{Name: "tenants/acme", DisplayName: "ACME", MaxAddresses: 10, AddressesUsed: 7, AddressesHeld: 3},
		{Name: "tenants/lab", AddressesUsed: 2},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := "NAME           DISPLAY-NAME   ADDRESSES(USED/MAX)   CREATED\n" +
		"tenants/acme   ACME           7+3 held/10           -\n" +
		"tenants/lab    -              2/unlimited           -\n"
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("table (-want +got):\n%s", diff)
	}
}
