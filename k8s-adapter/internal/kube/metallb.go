package kube

import (
	"context"

	"k8s.io/client-go/tools/cache"
)

// metallbSync applies MetalLB's configuration resources to the IPAM.
type metallbSync struct {
	c      *Controller
	synced []cache.InformerSynced
}

func newMetalLBSync(c *Controller) (*metallbSync, error) {
	return &metallbSync{c: c}, nil
}

func (m *metallbSync) start(context.Context) {}

func (m *metallbSync) hasSynced() bool {
	for _, s := range m.synced {
		if !s() {
			return false
		}
	}
	return true
}

func (m *metallbSync) run(ctx context.Context) { <-ctx.Done() }
