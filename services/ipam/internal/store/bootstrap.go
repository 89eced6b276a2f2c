package store

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

// bootstrapPrefix holds bootstrap tokens by the SHA-256 of their secret.
const bootstrapPrefix = secretPrefix + "bootstrap/"

// BootstrapToken is what a bootstrap token is bound to.
type BootstrapToken struct {
	Tenant string    `json:"tenant"`
	Node   string    `json:"node"`
	Expire time.Time `json:"expire"`
	// Creator is who made it, for the audit of the trade.
	Creator string `json:"creator"`
}

// ErrBootstrapUnknown is a bootstrap token that does not exist: never
// made, already used, or expired and removed.
var ErrBootstrapUnknown = errors.New("store: unknown bootstrap token")

// BootstrapTokens keeps one-time bootstrap tokens in etcd, under
// /beacon/v1/secrets/bootstrap/, each on a lease that ends with it.
type BootstrapTokens struct {
	etcd    *clientv3.Client
	timeout time.Duration
}

// NewBootstrapTokens returns the bootstrap tokens of c; timeout bounds each
// etcd call.
func NewBootstrapTokens(c *Client, timeout time.Duration) *BootstrapTokens {
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	return &BootstrapTokens{etcd: c.Etcd(), timeout: timeout}
}

// Create stores t under hash (of the secret) until t.Expire.
func (b *BootstrapTokens) Create(ctx context.Context, hash []byte, t BootstrapToken) error {
	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	v, err := json.Marshal(t)
	if err != nil {
		return err
	}
	ttl := int64(time.Until(t.Expire)/time.Second) + 1
	lease, err := b.etcd.Grant(ctx, ttl)
	if err != nil {
		return fmt.Errorf("store: bootstrap token: %w: %w", ipam.ErrUnavailable, err)
	}
	k := bootstrapPrefix + hex.EncodeToString(hash)
	resp, err := b.etcd.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).
		Then(clientv3.OpPut(k, string(v), clientv3.WithLease(lease.ID))).
		Commit()
	if err != nil {
		return fmt.Errorf("store: bootstrap token: %w: %w", ipam.ErrUnavailable, err)
	}
	if !resp.Succeeded {
		return fmt.Errorf("store: bootstrap token: %w", ipam.ErrAlreadyExists)
	}
	return nil
}

// Consume returns the token stored under hash and deletes it, in one
// transaction: of two concurrent trades of one token, one gets it and the
// other ErrBootstrapUnknown.
func (b *BootstrapTokens) Consume(ctx context.Context, hash []byte) (BootstrapToken, error) {
	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	k := bootstrapPrefix + hex.EncodeToString(hash)
	resp, err := b.etcd.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(k), ">", 0)).
		Then(clientv3.OpGet(k), clientv3.OpDelete(k)).
		Commit()
	if err != nil {
		return BootstrapToken{}, fmt.Errorf("store: bootstrap token: %w: %w", ipam.ErrUnavailable, err)
	}
	if !resp.Succeeded {
		return BootstrapToken{}, ErrBootstrapUnknown
	}
	kvs := resp.Responses[0].GetResponseRange().GetKvs()
	del := resp.Responses[1].GetResponseDeleteRange().GetDeleted()
	if len(kvs) != 1 || del != 1 {
		return BootstrapToken{}, ErrBootstrapUnknown
	}
	var t BootstrapToken
	if err := json.Unmarshal(kvs[0].Value, &t); err != nil {
		return BootstrapToken{}, fmt.Errorf("store: bootstrap token: %w", err)
	}
	return t, nil
}
