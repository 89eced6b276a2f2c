package scalebench

import (
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"testing"
	"time"

	"github.com/beaconlb/beacon/services/ipam/internal/replica"
	"github.com/beaconlb/beacon/services/ipam/internal/store"
)

// TestColdHeapProfile loads BEACON_COLD_HEAP_SIZE allocations (the cold
// start's, written as coldStart writes them, without its tenants' nodes
// and peers) into a replica in this process and writes the live heap
// once loaded to BEACON_COLD_HEAP_PROFILE, for
// "go tool pprof -sample_index=inuse_space". BEACON_COLD_HEAP_DISTINCT_LABELS=1
// gives every owner a label set of its own (see coldFiller.distinctLabels).
// It is a measuring tool, not a check: without the variable it skips.
func TestColdHeapProfile(t *testing.T) {
	path := os.Getenv("BEACON_COLD_HEAP_PROFILE")
	if path == "" {
		t.Skip("set BEACON_COLD_HEAP_PROFILE=FILE (and BEACON_COLD_HEAP_SIZE, default 100000) to profile a loaded replica's heap")
	}
	size := 100_000
	if s := os.Getenv("BEACON_COLD_HEAP_SIZE"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("BEACON_COLD_HEAP_SIZE: %v", err)
		}
		size = n
	}
	ctx := t.Context()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	emb, err := store.StartEmbedded(ctx, store.EmbeddedConfig{Dir: t.TempDir(), Logger: quiet, QuotaBytes: 8 << 30})
	if err != nil {
		t.Fatal(err)
	}
	defer emb.Close()
	client, err := store.Dial(ctx, store.DialConfig{Endpoints: emb.Endpoints()})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	st, stop := runStore(ctx, client, io.Discard)
	filler := &coldFiller{st: st, now: time.Now().UTC(), distinctLabels: os.Getenv("BEACON_COLD_HEAP_DISTINCT_LABELS") == "1"}
	if err := filler.fillTo(ctx, size, io.Discard); err != nil {
		t.Fatal(err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	r := replica.New(client, quiet, replica.Options{})
	t0 := time.Now()
	if err := r.Load(ctx); err != nil {
		t.Fatal(err)
	}
	took := time.Since(t0)
	var after runtime.MemStats
	debug.FreeOSMemory() // as ipamd does once loaded
	runtime.ReadMemStats(&after)
	mib := func(n uint64) float64 { return float64(n) / (1 << 20) }
	t.Logf("distinct owner label sets: %v", filler.distinctLabels)
	t.Logf("%d allocations loaded in %v: live heap +%.1f MiB (%.0f bytes per allocation), in spans +%.1f MiB (%.0f bytes), allocated during the load %.1f MiB",
		size, took.Round(time.Millisecond), mib(after.HeapAlloc-before.HeapAlloc), float64(after.HeapAlloc-before.HeapAlloc)/float64(size),
		mib(after.HeapInuse-before.HeapInuse), float64(after.HeapInuse-before.HeapInuse)/float64(size), mib(after.TotalAlloc-before.TotalAlloc))
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		t.Fatal(err)
	}
	runtime.KeepAlive(r)
}
