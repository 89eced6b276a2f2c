package etcdhealth

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/beaconlb/beacon/services/ipam/internal/store"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// fill writes n values of size bytes under prefix through the embedded
// member's client, and returns the revision after.
func fill(ctx context.Context, t *testing.T, c *store.Client, prefix string, n, size int) int64 {
	t.Helper()
	v := strings.Repeat("x", size)
	var rev int64
	for i := range n {
		resp, err := c.Etcd().Put(ctx, fmt.Sprintf("%s%06d", prefix, i), v)
		if err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
		rev = resp.Header.Revision
	}
	return rev
}

// churn writes 16 MiB in values of 64 KiB, deletes them, compacts, and
// waits until the backend is mostly free pages.
func churn(ctx context.Context, t *testing.T, emb *store.Embedded, c *store.Client) store.Health {
	t.Helper()
	const n = 256
	fill(ctx, t, c, "/test/big/", n, 64<<10)
	var rev int64
	for i := range n {
		resp, err := c.Etcd().Delete(ctx, fmt.Sprintf("/test/big/%06d", i))
		if err != nil {
			t.Fatal(err)
		}
		rev = resp.Header.Revision
	}
	if _, err := c.Etcd().Compact(ctx, rev); err != nil {
		t.Fatal(err)
	}
	// The compaction frees the pages in the background; the backend counts
	// them at its next commit (of a write).
	for {
		if _, err := c.Etcd().Put(ctx, "/test/tick", "x"); err != nil {
			t.Fatal(err)
		}
		h, err := emb.Health(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if h.Members[0].FreeFraction() >= 0.5 {
			return h
		}
		select {
		case <-ctx.Done():
			t.Fatalf("after delete and compaction: backend %d bytes, %d in use; never mostly free", h.Members[0].DBSize, h.Members[0].DBSizeInUse)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// A member whose backend became mostly free pages (data written, deleted
// and compacted away) is defragmented by Check, once: a second Check
// within DefragEvery leaves it alone, and one after does it again only if
// it needs it.
func TestCheckDefragmentsAFreedMember(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	emb, err := store.StartEmbedded(ctx, store.EmbeddedConfig{Dir: t.TempDir(), LogLevel: "fatal"})
	if err != nil {
		t.Fatal(err)
	}
	defer emb.Close()
	c := emb.Client()
	defer func() { _ = c.Close() }()

	// 16 MiB written in values of 64 KiB, then deleted and compacted.
	before := churn(ctx, t, emb, c)

	now := time.Now()
	m := New(emb, quiet(), Options{DefragFreeFraction: 0.5, DefragMinBytes: 1 << 20, DefragEvery: time.Hour, Now: func() time.Time { return now }})
	if err := m.Check(ctx); err != nil {
		t.Fatal(err)
	}
	after, err := emb.Health(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := after.Members[0].DBSize, before.Members[0].DBSize; a > b/2 {
		t.Errorf("backend %d bytes after Check, %d before: not defragmented", a, b)
	}

	// Freed again; within the hour, Check leaves it alone.
	grown := churn(ctx, t, emb, c)
	now = now.Add(30 * time.Minute)
	if err := m.Check(ctx); err != nil {
		t.Fatal(err)
	}
	if h, _ := emb.Health(ctx); h.Members[0].DBSize < grown.Members[0].DBSize {
		t.Errorf("defragmented again 30 minutes after the last (%d bytes, was %d)", h.Members[0].DBSize, grown.Members[0].DBSize)
	}
	now = now.Add(31 * time.Minute)
	if err := m.Check(ctx); err != nil {
		t.Fatal(err)
	}
	if h, _ := emb.Health(ctx); h.Members[0].DBSize > grown.Members[0].DBSize/2 {
		t.Errorf("not defragmented an hour after the last (%d bytes, was %d)", h.Members[0].DBSize, grown.Members[0].DBSize)
	}
}

// A member past its quota raises NOSPACE, refuses writes, and Health says
// so (the metric beacon.etcd.alarm_nospace follows it).
func TestNoSpaceIsReported(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	emb, err := store.StartEmbedded(ctx, store.EmbeddedConfig{Dir: t.TempDir(), LogLevel: "fatal", QuotaBytes: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer emb.Close()
	c := emb.Client()
	defer func() { _ = c.Close() }()
	v := strings.Repeat("x", 64<<10)
	var werr error
	for i := 0; i < 1000 && werr == nil; i++ {
		_, werr = c.Etcd().Put(ctx, fmt.Sprintf("/test/full/%06d", i), v)
	}
	if werr == nil || !strings.Contains(werr.Error(), "space exceeded") {
		t.Fatalf("writes past a 4 MiB quota: %v; want database space exceeded", werr)
	}
	m := New(emb, quiet(), Options{QuotaBytes: 4 << 20})
	if err := m.Check(ctx); err != nil {
		t.Fatal(err)
	}
	m.mu.Lock()
	h := m.last
	m.mu.Unlock()
	if !h.NoSpace || len(h.Alarms) != 1 || h.Alarms[0] != "NOSPACE" {
		t.Errorf("health after NOSPACE: %+v; want the NOSPACE alarm", h)
	}
}
