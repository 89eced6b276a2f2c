package kube_test

import (
	"context"
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/beaconlb/beacon/k8s-adapter/internal/kube"
	"github.com/beaconlb/beacon/k8s-adapter/internal/request"
)

// A leader whose Lease another replica takes (as when API server writes
// stall past the renew deadline, seen in TestWholeChain with the API server
// on the IPAM's etcd while its leader was killed) stops leading, and Run
// returns ErrLostLeadership so that the process exits and its Deployment
// starts it again. Before, Run's deferred informer shutdown waited for the
// informers' context, which only Run's own return could end: the process
// stayed up, leading nothing, and no Service was reconciled.
func TestLostLeaseEndsRun(t *testing.T) {
	e := newEnv(t, nil)
	co := apiLimits
	co.Kubeconfig = cluster.Kubeconfig
	kc, err := kube.Connect(co)
	if err != nil {
		t.Fatal(err)
	}
	c, err := kube.New(kc, ipam, testLogger(t), kube.Config{
		Tenant: e.tenant, Filter: request.Filter{Class: e.class},
		LeaderElection: kube.LeaderElection{
			Enabled: true, Namespace: e.ns, Name: "beacon-k8s-adapter", Identity: "a",
			LeaseDuration: 4 * time.Second, RenewDeadline: 3 * time.Second, RetryPeriod: 500 * time.Millisecond,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	waitFor(t, "a to lead", func() (bool, string) { return c.Stats().Leading, "" })

	// Another replica takes the Lease: a's renewals fail from now on.
	leases := k8s.CoordinationV1().Leases(e.ns)
	var taken time.Time
	waitFor(t, "the Lease taken", func() (bool, string) {
		l, err := leases.Get(context.Background(), "beacon-k8s-adapter", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		thief, secs, now := "thief", int32(60), metav1.NewMicroTime(time.Now())
		l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds, l.Spec.AcquireTime, l.Spec.RenewTime = &thief, &secs, &now, &now
		if _, err := leases.Update(context.Background(), l, metav1.UpdateOptions{}); err != nil {
			return false, err.Error() // a renewal in between: try again
		}
		taken = time.Now()
		return true, ""
	})
	select {
	case err := <-done:
		t.Logf("Run returned %v after the Lease was taken", time.Since(taken).Round(time.Millisecond))
		if !errors.Is(err, kube.ErrLostLeadership) {
			t.Errorf("Run returned %v, want ErrLostLeadership", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run still running 20 s after the Lease was taken (renew deadline 3 s)")
	}
	if c.Stats().Leading {
		t.Error("still leading")
	}
}
