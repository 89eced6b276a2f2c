package kube

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// ErrLostLeadership is returned by Run when another replica took the Lease:
// the process should exit and start again as a standby.
var ErrLostLeadership = errors.New("lost leadership")

// runElected campaigns for the Lease and leads while holding it. Informers
// run on every replica, so a standby that wins starts with warm caches.
func (c *Controller) runElected(ctx context.Context) error {
	le := c.cfg.LeaderElection
	if le.Identity == "" {
		le.Identity = identity()
	}
	if le.LeaseDuration <= 0 {
		le.LeaseDuration = 8 * time.Second
	}
	if le.RenewDeadline <= 0 {
		le.RenewDeadline = 5 * time.Second
	}
	if le.RetryPeriod <= 0 {
		le.RetryPeriod = time.Second
	}
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: le.Namespace, Name: le.Name},
		Client:     c.kube.client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: le.Identity},
	}
	var leadErr error
	led := make(chan struct{}) // closed when lead returns
	var acquired atomic.Bool
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   le.LeaseDuration,
		RenewDeadline:   le.RenewDeadline,
		RetryPeriod:     le.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            le.Name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				acquired.Store(true)
				defer close(led)
				c.logger.InfoContext(ctx, "leading", "lease", le.Namespace+"/"+le.Name, "identity", le.Identity)
				leadErr = c.lead(ctx)
			},
			OnStoppedLeading: func() {
				c.logger.Info("stopped leading", "identity", le.Identity)
			},
			OnNewLeader: func(id string) {
				if id != le.Identity {
					c.logger.Info("standing by", "leader", id, "identity", le.Identity)
				}
			},
		},
	})
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	// Run returns when ctx is done or the Lease is lost; it calls
	// OnStoppedLeading (even if it never led) before returning, and cancels
	// the context lead runs under.
	elector.Run(ctx)
	if !acquired.Load() {
		return nil // ctx ended before this replica led
	}
	select {
	case <-led:
	case <-time.After(le.RenewDeadline):
		return errors.New("reconcilers did not stop after leadership ended")
	}
	if ctx.Err() != nil {
		return leadErr
	}
	return errors.Join(ErrLostLeadership, leadErr)
}
