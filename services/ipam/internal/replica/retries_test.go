package replica_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
	"github.com/beaconlb/beacon/services/ipam/internal/replica"
)

// apiClients are the clients of every service of one replica that takes
// a request_id.
type apiClients struct {
	allocs  ipamv1.AllocationServiceClient
	pools   ipamv1.PoolServiceClient
	tenants ipamv1.TenantServiceClient
	tokens  ipamv1.TokenServiceClient
	ann     ipamv1.AnnouncementServiceClient
}

func clientsOf(t *testing.T, n *node) apiClients {
	conn := dialReplica(t, n.addr)
	return apiClients{
		allocs: n.allocs, pools: n.pools,
		tenants: ipamv1.NewTenantServiceClient(conn), tokens: ipamv1.NewTokenServiceClient(conn),
		ann: ipamv1.NewAnnouncementServiceClient(conn),
	}
}

// retryProbe is one request with a request_id, for the property "a retry
// gets exactly the first answer, whatever happened since". send makes the
// request; disturb then changes or ends what it answered (release and
// allocate again for another request, update, delete and create again),
// through any replica; every retry, on any replica, must answer as the
// first send did. setup, if set, runs once before the first send. clean, if set, hides fields a retry cannot repeat (a
// token's secret).
type retryProbe struct {
	name    string
	setup   func(ctx context.Context, c apiClients) error
	send    func(ctx context.Context, c apiClients) (proto.Message, error)
	disturb func(ctx context.Context, c apiClients) error
	clean   func(m proto.Message)
}

// checkRetries runs the property of every probe: the first send on
// first, the disturbance, then retries on each of retriers (every replica
// of the cluster, a restarted one...); it returns what broke it.
func checkRetries(ctx context.Context, probes []retryProbe, first apiClients, retriers map[string]apiClients) []string {
	var bad []string
	answers := make([]proto.Message, len(probes))
	for i, p := range probes {
		if p.setup != nil {
			if err := p.setup(ctx, first); err != nil {
				bad = append(bad, fmt.Sprintf("%s: setup: %v", p.name, err))
				continue
			}
		}
		m, err := p.send(ctx, first)
		if err != nil {
			bad = append(bad, fmt.Sprintf("%s: first send: %v", p.name, err))
			continue
		}
		answers[i] = m
		if p.clean != nil {
			p.clean(answers[i])
		}
		if p.disturb != nil {
			if err := p.disturb(ctx, first); err != nil {
				bad = append(bad, fmt.Sprintf("%s: disturb: %v", p.name, err))
			}
		}
	}
	for i, p := range probes {
		if answers[i] == nil {
			continue
		}
		for where, c := range retriers {
			m, err := p.send(ctx, c)
			if err != nil {
				bad = append(bad, fmt.Sprintf("%s: retry on %s: %v", p.name, where, err))
				continue
			}
			if p.clean != nil {
				p.clean(m)
			}
			if d := cmpDiff(answers[i], m); d != "" {
				bad = append(bad, fmt.Sprintf("%s: retry on %s answered otherwise (-first +retry):\n%s", p.name, where, d))
			}
		}
	}
	return bad
}

func cmpDiff(a, b proto.Message) string {
	return cmp.Diff(a, b, protocmp.Transform())
}

// retryProbes are probes for every method that takes a request_id, in
// tenant "retry" and pool "retry" (which the caller creates).
func retryProbes() []retryProbe {
	const tenant = "retry"
	parent := "tenants/" + tenant
	alloc := func(owner, rid string) *ipamv1.AllocateRequest {
		return &ipamv1.AllocateRequest{Parent: parent, RequestId: rid, Allocation: &ipamv1.Allocation{Owner: owner}}
	}
	// reallocate releases owner and allocates it again for another
	// request, first taking the next free address so that the new
	// allocation gets another address as well as another uid.
	reallocate := func(owner string) func(ctx context.Context, c apiClients) error {
		return func(ctx context.Context, c apiClients) error {
			if _, err := c.allocs.Release(ctx, &ipamv1.ReleaseRequest{Parent: parent, Owner: owner, Hold: dur(0)}); err != nil {
				return err
			}
			if _, err := c.allocs.Allocate(ctx, alloc(owner+"-squatter", "")); err != nil {
				return err
			}
			_, err := c.allocs.Allocate(ctx, alloc(owner, "another-request-"+strings.ReplaceAll(owner, "/", "-")))
			return err
		}
	}
	msg := func(m proto.Message, err error) (proto.Message, error) { return m, err }
	return []retryProbe{
		{
			name: "Allocate (created)",
			send: func(ctx context.Context, c apiClients) (proto.Message, error) {
				return msg(c.allocs.Allocate(ctx, alloc("ns/new", "alloc-new")))
			},
			disturb: reallocate("ns/new"),
		},
		{
			name: "Allocate (existing)",
			setup: func(ctx context.Context, c apiClients) error {
				_, err := c.allocs.Allocate(ctx, alloc("ns/existing", ""))
				return err
			},
			send: func(ctx context.Context, c apiClients) (proto.Message, error) {
				return msg(c.allocs.Allocate(ctx, alloc("ns/existing", "alloc-existing")))
			},
			disturb: reallocate("ns/existing"),
		},
		{
			name: "UpdateAllocation",
			setup: func(ctx context.Context, c apiClients) error {
				_, err := c.allocs.Allocate(ctx, alloc("ns/upd", ""))
				return err
			},
			send: func(ctx context.Context, c apiClients) (proto.Message, error) {
				return msg(c.allocs.UpdateAllocation(ctx, &ipamv1.UpdateAllocationRequest{
					RequestId:  "update-1",
					Allocation: &ipamv1.Allocation{Name: nameOf(tenant, "ns/upd"), OwnerLabels: map[string]string{"v": "1"}},
					UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"owner_labels"}},
				}))
			},
			disturb: reallocate("ns/upd"),
		},
		{
			name: "Release",
			setup: func(ctx context.Context, c apiClients) error {
				_, err := c.allocs.Allocate(ctx, alloc("ns/rel", ""))
				return err
			},
			send: func(ctx context.Context, c apiClients) (proto.Message, error) {
				return msg(c.allocs.Release(ctx, &ipamv1.ReleaseRequest{Parent: parent, Owner: "ns/rel", RequestId: "release-1", Hold: dur(0)}))
			},
			disturb: func(ctx context.Context, c apiClients) error {
				_, err := c.allocs.Allocate(ctx, alloc("ns/rel", ""))
				return err
			},
		},
		{
			name: "CreatePool",
			send: func(ctx context.Context, c apiClients) (proto.Message, error) {
				return msg(c.pools.CreatePool(ctx, &ipamv1.CreatePoolRequest{PoolId: "retry-p", RequestId: "pool-create", Pool: &ipamv1.Pool{Ranges: []string{"203.0.113.200/30"}, Tenants: []string{"nobody"}}}))
			},
			disturb: func(ctx context.Context, c apiClients) error {
				if _, err := c.pools.DeletePool(ctx, &ipamv1.DeletePoolRequest{Name: "pools/retry-p"}); err != nil {
					return err
				}
				_, err := c.pools.CreatePool(ctx, &ipamv1.CreatePoolRequest{PoolId: "retry-p", Pool: &ipamv1.Pool{Ranges: []string{"203.0.113.204/30"}, Tenants: []string{"nobody"}}})
				return err
			},
			clean: livePoolStatus,
		},
		{
			name: "UpdatePool",
			setup: func(ctx context.Context, c apiClients) error {
				_, err := c.pools.CreatePool(ctx, &ipamv1.CreatePoolRequest{PoolId: "retry-q", Pool: &ipamv1.Pool{Ranges: []string{"203.0.113.208/30"}, Tenants: []string{"nobody"}}})
				return err
			},
			send: func(ctx context.Context, c apiClients) (proto.Message, error) {
				return msg(c.pools.UpdatePool(ctx, &ipamv1.UpdatePoolRequest{
					RequestId: "pool-update", Pool: &ipamv1.Pool{Name: "pools/retry-q", Labels: map[string]string{"v": "1"}},
					UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"labels"}},
				}))
			},
			disturb: func(ctx context.Context, c apiClients) error {
				_, err := c.pools.UpdatePool(ctx, &ipamv1.UpdatePoolRequest{
					Pool: &ipamv1.Pool{Name: "pools/retry-q", Labels: map[string]string{"v": "2"}}, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"labels"}},
				})
				return err
			},
			clean: livePoolStatus,
		},
		{
			name: "CreateTenant",
			send: func(ctx context.Context, c apiClients) (proto.Message, error) {
				return msg(c.tenants.CreateTenant(ctx, &ipamv1.CreateTenantRequest{TenantId: "retry-t", RequestId: "tenant-create", Tenant: &ipamv1.Tenant{MaxAddresses: 5}}))
			},
			disturb: func(ctx context.Context, c apiClients) error {
				if _, err := c.tenants.DeleteTenant(ctx, &ipamv1.DeleteTenantRequest{Name: "tenants/retry-t"}); err != nil {
					return err
				}
				_, err := c.tenants.CreateTenant(ctx, &ipamv1.CreateTenantRequest{TenantId: "retry-t", Tenant: &ipamv1.Tenant{MaxAddresses: 7}})
				return err
			},
		},
		{
			name: "CreateToken",
			send: func(ctx context.Context, c apiClients) (proto.Message, error) {
				return msg(c.tokens.CreateToken(ctx, &ipamv1.CreateTokenRequest{TokenId: "retry-k", RequestId: "token-create", Token: &ipamv1.Token{Role: ipamv1.Role_ROLE_VIEWER}}))
			},
			disturb: func(ctx context.Context, c apiClients) error {
				if _, err := c.tokens.DeleteToken(ctx, &ipamv1.DeleteTokenRequest{Name: "tokens/retry-k"}); err != nil {
					return err
				}
				_, err := c.tokens.CreateToken(ctx, &ipamv1.CreateTokenRequest{TokenId: "retry-k", Token: &ipamv1.Token{Role: ipamv1.Role_ROLE_VIEWER}})
				return err
			},
			// The secret is not kept: a retry gets the token without it.
			clean: func(m proto.Message) { m.(*ipamv1.CreateTokenResponse).Secret = "" },
		},
		{
			name: "CreateCommunity",
			send: func(ctx context.Context, c apiClients) (proto.Message, error) {
				return msg(c.ann.CreateCommunity(ctx, &ipamv1.CreateCommunityRequest{Parent: parent, CommunityId: "retry-c", RequestId: "community-create", Community: &ipamv1.Community{
					Aliases: []*ipamv1.CommunityAlias{{Name: "a", Value: "64500:1"}},
				}}))
			},
			disturb: func(ctx context.Context, c apiClients) error {
				if _, err := c.ann.DeleteCommunity(ctx, &ipamv1.DeleteCommunityRequest{Name: parent + "/communities/retry-c"}); err != nil {
					return err
				}
				_, err := c.ann.CreateCommunity(ctx, &ipamv1.CreateCommunityRequest{Parent: parent, CommunityId: "retry-c", Community: &ipamv1.Community{
					Aliases: []*ipamv1.CommunityAlias{{Name: "b", Value: "64500:2"}},
				}})
				return err
			},
		},
	}
}

// A retry with a request_id gets exactly the first answer (AIP-155), for
// every method that takes one, even after what it answered was changed,
// or released and allocated again by another request: on the replica that
// answered first, on another replica, and on a replica restarted since.
func TestRetryGetsTheFirstAnswer(t *testing.T) {
	env := startEtcd(t, t.TempDir())
	a := startNode(t, env.dial(t), replica.Options{})
	b := startNode(t, env.dial(t), replica.Options{})
	mustPool(t, a, "retry", &ipamv1.Pool{Ranges: []string{"198.51.100.0/27"}, Tenants: []string{"retry"}})
	ca, cb := clientsOf(t, a), clientsOf(t, b)

	probes := retryProbes()
	ctx := ctxT(t)
	bad := checkRetries(ctx, probes, ca, map[string]apiClients{"the first replica": ca, "another replica": cb})
	// A replica restarted (a new process: a new etcd client, an empty
	// index loaded from etcd) answers retries the same.
	a.stop()
	restarted := startNode(t, env.dial(t), replica.Options{})
	bad = append(bad, checkRetriesAgain(ctx, t, probes, cb, clientsOf(t, restarted))...)
	for _, s := range bad {
		t.Error(s)
	}
}

// checkRetriesAgain re-sends each probe on first and then on again (no
// disturbance in between) and reports answers that differ.
func checkRetriesAgain(ctx context.Context, t *testing.T, probes []retryProbe, first, again apiClients) []string {
	t.Helper()
	var bad []string
	for _, p := range probes {
		want, err := p.send(ctx, first)
		if err != nil {
			bad = append(bad, fmt.Sprintf("%s: retry: %v", p.name, err))
			continue
		}
		got, err := p.send(ctx, again)
		if err != nil {
			bad = append(bad, fmt.Sprintf("%s: retry on a restarted replica: %v", p.name, err))
			continue
		}
		if p.clean != nil {
			p.clean(want)
			p.clean(got)
		}
		if d := cmpDiff(want, got); d != "" {
			bad = append(bad, fmt.Sprintf("%s: retry on a restarted replica answered otherwise:\n%s", p.name, d))
		}
	}
	return bad
}

// Retries sent at once, on two replicas, while the first request commits,
// all get the one answer of the request that committed: one allocation,
// then one release.
func TestConcurrentRetriesGetOneAnswer(t *testing.T) {
	env := startEtcd(t, t.TempDir())
	nodes := []*node{startNode(t, env.dial(t), replica.Options{}), startNode(t, env.dial(t), replica.Options{})}
	mustPool(t, nodes[0], "race", &ipamv1.Pool{Ranges: []string{"198.51.100.64/27"}, Tenants: []string{"race"}})
	for round := range 5 {
		req := &ipamv1.AllocateRequest{Parent: "tenants/race", RequestId: fmt.Sprintf("race-%d", round), Allocation: &ipamv1.Allocation{Owner: fmt.Sprintf("ns/r%d", round)}}
		const senders = 6
		answers := make([]*ipamv1.AllocateResponse, senders)
		errs := make([]error, senders)
		var wg sync.WaitGroup
		for i := range senders {
			wg.Go(func() { answers[i], errs[i] = nodes[i%2].allocs.Allocate(ctxT(t), req) })
		}
		wg.Wait()
		for i := range senders {
			if errs[i] != nil {
				t.Fatalf("round %d, sender %d: %v", round, i, errs[i])
			}
			if d := cmpDiff(answers[0], answers[i]); d != "" {
				t.Errorf("round %d: sender %d answered otherwise than sender 0:\n%s", round, i, d)
			}
		}
		if !answers[0].GetCreated() {
			t.Errorf("round %d: created false, want true", round)
		}
		// The same for a release: one release, the same addresses for
		// every sender (not NOT_FOUND for those that come second).
		rel := &ipamv1.ReleaseRequest{Parent: "tenants/race", Owner: req.GetAllocation().GetOwner(), RequestId: fmt.Sprintf("race-release-%d", round), Hold: dur(0)}
		released := make([]*ipamv1.ReleaseResponse, senders)
		for i := range senders {
			wg.Go(func() { released[i], errs[i] = nodes[i%2].allocs.Release(ctxT(t), rel) })
		}
		wg.Wait()
		for i := range senders {
			if errs[i] != nil {
				t.Fatalf("round %d, release sender %d: %v", round, i, errs[i])
			}
			if d := cmpDiff(released[0], released[i]); d != "" {
				t.Errorf("round %d: release sender %d answered otherwise than sender 0:\n%s", round, i, d)
			}
		}
		diff(t, "released", answers[0].GetAllocation().GetAddresses(), released[0].GetAddresses())
	}
}

// livePoolStatus clears a pool's status: its usage is live, as of the
// answer (a retry's included), not part of what the request did.
func livePoolStatus(m proto.Message) {
	switch r := m.(type) {
	case *ipamv1.CreatePoolResponse:
		r.GetPool().Status = nil
	case *ipamv1.UpdatePoolResponse:
		r.GetPool().Status = nil
	}
}
