package integration

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var httpClient = &http.Client{Timeout: 10 * time.Second}

// The README's quickstart: start ipamd with embedded etcd, create a pool,
// allocate, list; then SIGTERM stops it cleanly, and a restart on the same
// data directory keeps the allocation.
func TestQuickstart(t *testing.T) {
	data := t.TempDir()
	d := startIPAMD(t, "--data-dir", data)

	if code, body := httpGet(t, "http://"+d.ops+"/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz = %d %q", code, body)
	}
	if code, _ := httpGet(t, "http://"+d.ops+"/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz = %d", code)
	}

	ctl(t, d, false, "pool", "create", "web", "--range", "192.0.2.0/28", "--range", "2001:db8::/64")
	var alloc struct {
		Name      string   `json:"name"`
		Addresses []string `json:"addresses"`
		Pool      string   `json:"pool"`
	}
	out := ctl(t, d, false, "-o", "json", "alloc", "allocate", "default/nginx", "--tenant", "demo", "--dual-stack", "require")
	if err := json.Unmarshal([]byte(out), &alloc); err != nil {
		t.Fatalf("allocate output %q: %v", out, err)
	}
	if diff := cmp.Diff([]string{"192.0.2.0", "2001:db8::"}, alloc.Addresses); diff != "" {
		t.Fatalf("addresses (-want +got):\n%s", diff)
	}
	if list := ctl(t, d, false, "alloc", "list"); !strings.Contains(list, "default/nginx") {
		t.Fatalf("alloc list misses the allocation:\n%s", list)
	}
	if pools := ctl(t, d, false, "pool", "get", "web"); !strings.Contains(pools, "1/16") {
		t.Fatalf("pool usage not shown as 1/16:\n%s", pools)
	}
	if audit := ctl(t, d, false, "audit", "list"); !strings.Contains(audit, "ALLOCATE") {
		t.Fatalf("audit list misses the allocation:\n%s", audit)
	}
	// A bad request is refused with the field and the reason.
	msg := ctl(t, d, true, "pool", "create", "bad", "--range", "192.0.2.1/24")
	if !strings.Contains(msg, "InvalidArgument") || !strings.Contains(msg, "pool.ranges[0]") || !strings.Contains(msg, "192.0.2.0/24") {
		t.Fatalf("bad range error does not name field and fix: %q", msg)
	}
	// The metrics endpoint exports the gRPC server metrics.
	if _, metrics := httpGet(t, "http://"+d.ops+"/metrics"); !strings.Contains(metrics, "rpc_server") {
		t.Fatalf("/metrics has no rpc_server metrics")
	}

	took, err := d.stop(t)
	if err != nil {
		t.Fatalf("ipamd exit on SIGTERM: %v\n%s", err, d.logText())
	}
	if took > 15*time.Second {
		t.Errorf("SIGTERM took %v", took)
	}
	if !strings.Contains(d.logText(), `"clean":true`) {
		t.Errorf("ipamd did not report a clean stop:\n%s", d.logText())
	}

	d2 := startIPAMD(t, "--data-dir", data)
	out = ctl(t, d2, false, "-o", "json", "alloc", "get", alloc.Name)
	var again struct {
		Addresses []string `json:"addresses"`
	}
	if err := json.Unmarshal([]byte(out), &again); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(alloc.Addresses, again.Addresses); diff != "" {
		t.Fatalf("allocation moved across restart (-before +after):\n%s", diff)
	}
}
