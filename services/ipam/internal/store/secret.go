package store

import (
	"context"
	"crypto/rand"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

// SharedSecret returns the secret called name that every replica shares,
// making it (size random bytes) if no replica has yet: the first writer
// wins, every other reads what it wrote. It lives under /beacon/v1/secrets/,
// outside the state the watch follows; protect etcd accordingly.
func (s *Store) SharedSecret(ctx context.Context, name string, size int) ([]byte, error) {
	ctx, cancel := s.bounded(ctx)
	defer cancel()
	k := secretPrefix + name
	fresh := make([]byte, size)
	if _, err := rand.Read(fresh); err != nil {
		return nil, fmt.Errorf("store: secret %s: %w", name, err)
	}
	resp, err := s.client.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).
		Then(clientv3.OpPut(k, string(fresh))).
		Else(clientv3.OpGet(k)).
		Commit()
	if err != nil {
		return nil, fmt.Errorf("store: secret %s: %w: %w", name, ipam.ErrUnavailable, err)
	}
	if resp.Succeeded {
		return fresh, nil
	}
	kvs := resp.Responses[0].GetResponseRange().GetKvs()
	if len(kvs) == 0 || len(kvs[0].Value) < size {
		return nil, fmt.Errorf("store: secret %s is missing or short", name)
	}
	return kvs[0].Value, nil
}
