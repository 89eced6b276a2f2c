package replica_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/beaconlb/beacon/pkg/testwait"
	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

// The tests of one file share one embedded etcd (see sharedEtcd). They stay
// independent because each test uses its own pool names, its own address
// ranges and its own tenants, and every pool it makes names its tenants, so
// that another test's pools are never candidates for its allocations.
//
// Address plan of the shared etcds (the tests of one file never overlap;
// tests with an etcd of their own use what they like):
//
//	pools_test.go        192.0.2.0/25, 203.0.113.0-1 and .254-255, 2001:db8:10::/44
//	allocations_test.go  198.51.100.0/24, 2001:db8:20::/44
//	watch_test.go        192.0.2.128/25, 2001:db8:30::/44
var shared struct {
	mu   sync.Mutex
	envs map[string]*sharedEnv
	dirs []string
}

type sharedEnv struct {
	*etcdEnv
	users map[string]*testing.T // the tests that used it, by name
}

// sharedEtcd returns the embedded etcd that the tests of one file share,
// starting it on first use. A test run again (go test -count=N) gets a
// fresh one, so that repeated runs start clean. TestMain stops them.
func sharedEtcd(t *testing.T, name string) *etcdEnv {
	t.Helper()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if e, ok := shared.envs[name]; ok {
		if prev, ran := e.users[t.Name()]; !ran || prev == t {
			e.users[t.Name()] = t
			return e.etcdEnv
		}
		e.stop()
	}
	dir, err := os.MkdirTemp("", "beacon-etcd-"+name+"-")
	if err != nil {
		t.Fatal(err)
	}
	shared.dirs = append(shared.dirs, dir)
	e, err := openEtcd(dir)
	if err != nil {
		t.Fatal(err)
	}
	if shared.envs == nil {
		shared.envs = make(map[string]*sharedEnv)
	}
	shared.envs[name] = &sharedEnv{etcdEnv: e, users: map[string]*testing.T{t.Name(): t}}
	return e
}

func TestMain(m *testing.M) {
	code := m.Run()
	shared.mu.Lock()
	for _, e := range shared.envs {
		e.stop()
	}
	for _, d := range shared.dirs {
		_ = os.RemoveAll(d)
	}
	shared.mu.Unlock()
	os.Exit(code)
}

const (
	fam4        = ipamv1.IPFamily_IP_FAMILY_IPV4
	fam6        = ipamv1.IPFamily_IP_FAMILY_IPV6
	singleStack = ipamv1.IPFamilyPolicy_IP_FAMILY_POLICY_SINGLE_STACK
	preferDual  = ipamv1.IPFamilyPolicy_IP_FAMILY_POLICY_PREFER_DUAL_STACK
	requireDual = ipamv1.IPFamilyPolicy_IP_FAMILY_POLICY_REQUIRE_DUAL_STACK
)

func dur(d time.Duration) *durationpb.Duration { return durationpb.New(d) }

func boolp(b bool) *bool { return &b }

// wantStatus fails unless err has the code and its message contains every
// one of parts.
func wantStatus(t *testing.T, err error, code codes.Code, parts ...string) {
	t.Helper()
	st := status.Convert(err)
	if err == nil || st.Code() != code {
		t.Fatalf("got %v, want code %v", err, code)
	}
	for _, p := range parts {
		if !strings.Contains(st.Message(), p) {
			t.Errorf("message %q does not contain %q", st.Message(), p)
		}
	}
}

// violations returns the fields of the BadRequest details of err.
func violations(err error) []string {
	var out []string
	for _, d := range status.Convert(err).Details() {
		if br, ok := d.(*errdetails.BadRequest); ok {
			for _, v := range br.GetFieldViolations() {
				out = append(out, v.GetField())
			}
		}
	}
	return out
}

// violation returns the description of the violation of field in err.
func violation(err error, field string) string {
	for _, d := range status.Convert(err).Details() {
		if br, ok := d.(*errdetails.BadRequest); ok {
			for _, v := range br.GetFieldViolations() {
				if v.GetField() == field {
					return v.GetDescription()
				}
			}
		}
	}
	return ""
}

// reason returns the ErrorInfo reason of err.
func reason(err error) string {
	for _, d := range status.Convert(err).Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok {
			return ei.GetReason()
		}
	}
	return ""
}

// asActor returns a context whose calls carry the gateway's actor metadata.
func asActor(ctx context.Context, actor string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "beacon-actor", actor)
}

func getPool(t *testing.T, n *node, id string) *ipamv1.Pool {
	t.Helper()
	resp, err := n.pools.GetPool(ctxT(t), &ipamv1.GetPoolRequest{Name: "pools/" + id})
	if err != nil {
		t.Fatalf("get pool %s: %v", id, err)
	}
	return resp.GetPool()
}

func mustRelease(t *testing.T, n *node, req *ipamv1.ReleaseRequest) *ipamv1.ReleaseResponse {
	t.Helper()
	resp, err := n.allocs.Release(ctxT(t), req)
	if err != nil {
		t.Fatalf("release %v: %v", req, err)
	}
	return resp
}

// releaseOwner frees an owner's addresses at once.
func releaseOwner(t *testing.T, n *node, tenant, owner string) {
	t.Helper()
	mustRelease(t, n, &ipamv1.ReleaseRequest{Parent: "tenants/" + tenant, Owner: owner, Hold: dur(0)})
}

// addrsOf allocates for an owner and returns its addresses.
func addrsOf(t *testing.T, n *node, tenant string, a *ipamv1.Allocation) []string {
	t.Helper()
	return mustAllocate(t, n, tenant, a).GetAddresses()
}

// usage returns a pool's status as "family size used free" lines.
func usage(p *ipamv1.Pool) []string {
	var out []string
	for _, f := range p.GetStatus().GetFamilies() {
		out = append(out, fmt.Sprintf("%s size=%s used=%d free=%s", f.GetFamily(), f.GetSize(), f.GetUsed(), f.GetFree()))
	}
	return out
}

// sortStrings compares string slices as sets.
var sortStrings = cmpopts.SortSlices(func(a, b string) bool { return a < b })

// diff fails the test with a go-cmp diff unless want and got are equal.
func diff(t *testing.T, what string, want, got any, opts ...cmp.Option) {
	t.Helper()
	if d := cmp.Diff(want, got, opts...); d != "" {
		t.Errorf("%s (-want +got):\n%s", what, d)
	}
}

// eventually polls cond until it holds or timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	testwait.Until(t, timeout, what, cond)
}

// never fails the test if bad holds at any time within d (checked at
// every testwait.Interval and at the end): the proof that something did
// not happen, over an explicit deadline. bad reads what the announcers'
// plan streams recorded (everAnswered, l2Addrs).
func never(t *testing.T, d time.Duration, what string, bad func() bool) {
	t.Helper()
	if err := testwait.Poll(t.Context(), d, func() error {
		if bad() {
			return nil
		}
		return testwait.ErrNotYet
	}); err == nil {
		t.Fatal(what)
	}
}

// allocationID is the documented ID of an owner's allocation: "a" and the
// first 20 hex digits of the SHA-256 of the owner.
func allocationID(owner string) string {
	sum := sha256.Sum256([]byte(owner))
	return "a" + hex.EncodeToString(sum[:])[:20]
}

// nameOf returns the resource name of owner's allocation in tenant, derived
// from the owner as the API documents.
func nameOf(tenant, owner string) string {
	return "tenants/" + tenant + "/allocations/" + allocationID(owner)
}

// createTenant creates a tenant with a quota (0: none) through n.
func createTenant(t *testing.T, n *node, id string, maxAddresses uint64) {
	t.Helper()
	conn, err := grpc.NewClient(n.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := ipamv1.NewTenantServiceClient(conn).CreateTenant(ctxT(t), &ipamv1.CreateTenantRequest{TenantId: id, Tenant: &ipamv1.Tenant{MaxAddresses: maxAddresses}}); err != nil {
		t.Fatal(err)
	}
}
