package robustness

import (
	"context"
	"math/rand/v2"
	"time"
)

// Faults injects one fault at a time at random until ctx is done, and
// repairs each before the next: a replica SIGKILLed and restarted, the
// etcd leader SIGKILLed and restarted, a replica frozen (SIGSTOP) and
// thawed, a replica cut from etcd and reconnected.
type Faults struct {
	C    *Cluster
	Rand *rand.Rand
	Cut  bool
	Logf func(format string, args ...any)
	// Count is how many faults ran; Kinds counts them by kind.
	Count int
	Kinds map[string]int
}

// Run injects faults until ctx is done; it returns with every fault
// repaired.
func (f *Faults) Run(ctx context.Context) {
	if f.Kinds == nil {
		f.Kinds = map[string]int{}
	}
	kinds := []string{"kill-replica", "kill-etcd-leader", "stop-replica"}
	if f.Cut {
		kinds = append(kinds, "cut-replica")
	}
	repair := context.WithoutCancel(ctx)
	for {
		if !sleep(ctx, time.Duration(300+f.Rand.IntN(1200))*time.Millisecond) {
			return
		}
		kind := kinds[f.Rand.IntN(len(kinds))]
		r := f.Rand.IntN(len(f.C.replicas))
		hold := time.Duration(300+f.Rand.IntN(2700)) * time.Millisecond
		start := time.Now()
		var err error
		switch kind {
		case "kill-replica":
			f.C.KillReplica(r)
			sleep(repair, hold/3)
			err = f.C.RestartReplica(repair, r)
		case "kill-etcd-leader":
			var m int
			if m, err = f.C.EtcdLeader(repair); err == nil {
				f.C.KillEtcd(m)
				sleep(repair, hold/3)
				err = f.C.RestartEtcd(repair, m)
			}
		case "stop-replica":
			if err = f.C.StopReplica(r); err == nil {
				sleep(repair, hold)
				err = f.C.ContReplica(r)
			}
		case "cut-replica":
			if err = f.C.Cut(repair, r); err == nil {
				sleep(repair, hold)
				err = f.C.Heal(repair, r)
			}
		}
		if err != nil {
			f.Logf("fault %s: %v", kind, err)
			continue
		}
		f.Count++
		f.Kinds[kind]++
		f.Logf("fault %s (replica %d) repaired after %v", kind, r, time.Since(start).Round(time.Millisecond))
	}
}

// sleep waits d or until ctx is done; false if ctx ended it.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
