package ipam

import "testing"

func TestAllocationIDIsStableAndShaped(t *testing.T) {
	got := AllocationID("default/nginx")
	if got != AllocationID("default/nginx") || len(got) != 21 || got[0] != 'a' {
		t.Fatalf("AllocationID = %q", got)
	}
	if got == AllocationID("default/nginx2") {
		t.Fatal("different owners share an ID")
	}
}
