package allocator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

// ConfigResult is the outcome of a write to an announcement config object.
type ConfigResult struct {
	Value any
	Rev   int64
	// Replayed is set when the result is a retry's: the stored answer of
	// the request that first carried its request_id.
	Replayed bool
}

// configTenant is the tenant of a config ref "tenant/id".
func configTenant(ref ipam.Ref) string {
	for i := range len(ref.ID) {
		if ref.ID[i] == '/' {
			return ref.ID[:i]
		}
	}
	return ref.ID
}

// CreateConfig stores a new announcement config object (validated by the
// caller) under ref, failing if it exists. stamp sets its UID and times.
func (a *Allocator) CreateConfig(ctx context.Context, ref ipam.Ref, value any, stamp func(uid string, now time.Time), validateOnly bool, meta Meta) (ConfigResult, error) {
	tenant := configTenant(ref)
	if r, ok, err := a.replayed(ctx, tenant, meta); ok || err != nil {
		if err != nil {
			return ConfigResult{}, err
		}
		return a.replayConfig(ctx, ref, r)
	}
	stamp(newID(), a.opts.Now())
	if validateOnly {
		return ConfigResult{Value: value}, nil
	}
	ch := ipam.Change{Conds: []ipam.Cond{{Ref: ref}}, Puts: []ipam.Put{{Ref: ref, Value: value}}}
	if err := a.addRequestValue(&ch, tenant, meta, replay{Name: ref.ID, Created: true}, value); err != nil {
		return ConfigResult{}, err
	}
	rev, _, err := a.store.Commit(ctx, ch)
	if errors.Is(err, ipam.ErrConflict) {
		if r, ok, err := a.racedRetry(ctx, tenant, meta); ok || err != nil {
			if err != nil {
				return ConfigResult{}, err
			}
			return a.replayConfig(ctx, ref, r)
		}
		return ConfigResult{}, ipam.Refuse(ipam.ErrAlreadyExists, "%s already exists", ref.ID)
	}
	if err != nil {
		return ConfigResult{}, err
	}
	a.idx.Apply([]ipam.Event{{Ref: ref, Value: value, Rev: rev}}, 0)
	return ConfigResult{Value: value, Rev: rev}, nil
}

// addRequestValue adds the request record of a config write, with the
// object it leaves (value, of ref's kind) as the answer a retry gets.
func (a *Allocator) addRequestValue(ch *ipam.Change, tenant string, meta Meta, r replay, value any) error {
	if meta.RequestID == "" {
		return nil
	}
	b, err := json.Marshal(value)
	if err != nil {
		return fmt.Errorf("allocator: encode %T: %w", value, err)
	}
	r.Value = b
	a.addRequest(ch, tenant, meta, r)
	return nil
}

// replayConfig returns the object a replayed CreateConfig or UpdateConfig
// answered, as it answered it (a record of an older version names the
// object only: the object is read).
func (a *Allocator) replayConfig(ctx context.Context, ref ipam.Ref, r replay) (ConfigResult, error) {
	if len(r.Value) == 0 {
		return a.GetConfig(ctx, ref)
	}
	v := ipam.NewValue(ref.Kind)
	if v == nil {
		return ConfigResult{}, fmt.Errorf("allocator: stored request result of unknown kind %d", ref.Kind)
	}
	if err := json.Unmarshal(r.Value, v); err != nil {
		return ConfigResult{}, fmt.Errorf("allocator: stored request result: %w", err)
	}
	return ConfigResult{Value: v, Rev: r.rev(), Replayed: true}, nil
}

// GetConfig reads a config object.
func (a *Allocator) GetConfig(ctx context.Context, ref ipam.Ref) (ConfigResult, error) {
	ev, err := a.store.Get(ctx, ref)
	if errors.Is(err, ipam.ErrNotFound) {
		return ConfigResult{}, ipam.Refuse(ipam.ErrNotFound, "%s not found", ref.ID)
	}
	if err != nil {
		return ConfigResult{}, err
	}
	return ConfigResult{Value: ev.Value, Rev: ev.Rev}, nil
}

// UpdateConfig replaces a config object: next receives the current value
// and its revision and returns the new value (or an error). etagRev, if
// positive, must match.
func (a *Allocator) UpdateConfig(ctx context.Context, ref ipam.Ref, etagRev int64, next func(cur any, now time.Time) (any, error), validateOnly bool, meta Meta) (ConfigResult, error) {
	tenant := configTenant(ref)
	if r, ok, err := a.replayed(ctx, tenant, meta); ok || err != nil {
		if err != nil {
			return ConfigResult{}, err
		}
		return a.replayConfig(ctx, ref, r)
	}
	for range a.opts.MaxAttempts {
		cur, err := a.GetConfig(ctx, ref)
		if err != nil {
			return ConfigResult{}, err
		}
		if etagRev > 0 && etagRev != cur.Rev {
			return ConfigResult{}, ipam.Refuse(ipam.ErrEtagMismatch, "%s changed since etag was read", ref.ID)
		}
		v, err := next(cur.Value, a.opts.Now())
		if err != nil {
			return ConfigResult{}, err
		}
		if validateOnly {
			return ConfigResult{Value: v, Rev: cur.Rev}, nil
		}
		ch := ipam.Change{Conds: []ipam.Cond{{Ref: ref, Rev: cur.Rev}}, Puts: []ipam.Put{{Ref: ref, Value: v}}}
		if err := a.addRequestValue(&ch, tenant, meta, replay{Name: ref.ID}, v); err != nil {
			return ConfigResult{}, err
		}
		rev, _, err := a.store.Commit(ctx, ch)
		if errors.Is(err, ipam.ErrConflict) {
			if r, ok, err := a.racedRetry(ctx, tenant, meta); ok || err != nil {
				if err != nil {
					return ConfigResult{}, err
				}
				return a.replayConfig(ctx, ref, r)
			}
			continue
		}
		if err != nil {
			return ConfigResult{}, err
		}
		a.idx.Apply([]ipam.Event{{Ref: ref, Value: v, Rev: rev}}, 0)
		return ConfigResult{Value: v, Rev: rev}, nil
	}
	return ConfigResult{}, ipam.Refuse(ipam.ErrTooMuchContention, "%s kept changing concurrently; retry", ref.ID)
}

// DeleteConfig deletes a config object. inUse, if set, reports whether
// something still refers to it (checked against every object of kind
// users, with the delete conditional on none of them changing).
func (a *Allocator) DeleteConfig(ctx context.Context, ref ipam.Ref, etagRev int64, users ipam.Kind, inUse func(user any) bool, meta Meta) error {
	tenant := configTenant(ref)
	if _, ok, err := a.replayed(ctx, tenant, meta); ok || err != nil {
		return err
	}
	for range a.opts.MaxAttempts {
		cur, err := a.GetConfig(ctx, ref)
		if errors.Is(err, ipam.ErrNotFound) {
			// A retry sent while the first delete committed finds the
			// object gone: it answers what the first did.
			if _, ok, rerr := a.racedRetry(ctx, tenant, meta); ok || rerr != nil {
				return rerr
			}
		}
		if err != nil {
			return err
		}
		if etagRev > 0 && etagRev != cur.Rev {
			return ipam.Refuse(ipam.ErrEtagMismatch, "%s changed since etag was read", ref.ID)
		}
		ch := ipam.Change{Conds: []ipam.Cond{{Ref: ref, Rev: cur.Rev}}, Deletes: []ipam.Ref{ref}}
		if inUse != nil {
			rev, err := a.checkUsers(ctx, ref, users, tenant, inUse)
			if err != nil {
				return err
			}
			ch.Unchanged = []ipam.RangeCond{{From: ipam.Ref{Kind: users}, To: ipam.Ref{Kind: users}, Since: rev}}
		}
		a.addRequest(&ch, tenant, meta, replay{Name: ref.ID})
		rev, _, err := a.store.Commit(ctx, ch)
		if errors.Is(err, ipam.ErrConflict) {
			if _, ok, err := a.racedRetry(ctx, tenant, meta); ok || err != nil {
				return err
			}
			continue
		}
		if err == nil {
			a.idx.Apply([]ipam.Event{{Ref: ref, Rev: rev, Deleted: true}}, 0)
		}
		return err
	}
	return ipam.Refuse(ipam.ErrTooMuchContention, "%s kept changing concurrently; retry", ref.ID)
}

// checkUsers refuses with ipam.ErrInUse if an object of kind users in
// tenant uses ref, reading them all, a page at a time, at one revision,
// which it returns.
func (a *Allocator) checkUsers(ctx context.Context, ref ipam.Ref, users ipam.Kind, tenant string, inUse func(user any) bool) (int64, error) {
	var rev int64
	after := ""
	for {
		page, err := a.store.List(ctx, users, tenant+"/", after, a.opts.ListPage, rev)
		if err != nil {
			return 0, err
		}
		if rev == 0 {
			rev = page.Revision
		}
		for _, ev := range page.Items {
			if inUse(ev.Value) {
				return 0, ipam.Refuse(ipam.ErrInUse, "%s is used by %s", ref.ID, ev.Ref.ID)
			}
		}
		if !page.More || len(page.Items) == 0 {
			return rev, nil
		}
		after = page.Items[len(page.Items)-1].Ref.ID
	}
}

// CreateObjects stores new objects that must not exist yet, atomically:
// for an object together with its lookup records. It returns the first
// object; with a request_id, a retry gets the first object as the first
// request stored it, and Replayed set.
func (a *Allocator) CreateObjects(ctx context.Context, puts []ipam.Put, meta Meta) (ConfigResult, error) {
	first := puts[0].Ref
	if r, ok, err := a.replayed(ctx, adminTenant, meta); ok || err != nil {
		if err != nil {
			return ConfigResult{}, err
		}
		return a.replayConfig(ctx, first, r)
	}
	ch := ipam.Change{Puts: puts}
	for _, p := range puts {
		ch.Conds = append(ch.Conds, ipam.Cond{Ref: p.Ref})
	}
	if err := a.addRequestValue(&ch, adminTenant, meta, replay{Name: first.ID, Created: true}, puts[0].Value); err != nil {
		return ConfigResult{}, err
	}
	rev, _, err := a.store.Commit(ctx, ch)
	if errors.Is(err, ipam.ErrConflict) {
		if r, ok, err := a.racedRetry(ctx, adminTenant, meta); ok || err != nil {
			if err != nil {
				return ConfigResult{}, err
			}
			return a.replayConfig(ctx, first, r)
		}
		return ConfigResult{}, ipam.Refuse(ipam.ErrAlreadyExists, "%s already exists", first.ID)
	}
	if err != nil {
		return ConfigResult{}, err
	}
	events := make([]ipam.Event, len(puts))
	for i, p := range puts {
		events[i] = ipam.Event{Ref: p.Ref, Value: p.Value, Rev: rev}
	}
	a.idx.Apply(events, 0)
	return ConfigResult{Value: puts[0].Value, Rev: rev}, nil
}

// DeleteObjects deletes objects, the first of which must be at revision
// rev (0: any).
func (a *Allocator) DeleteObjects(ctx context.Context, rev int64, refs ...ipam.Ref) error {
	ch := ipam.Change{Deletes: refs}
	if rev > 0 {
		ch.Conds = []ipam.Cond{{Ref: refs[0], Rev: rev}}
	}
	crev, _, err := a.store.Commit(ctx, ch)
	if errors.Is(err, ipam.ErrConflict) {
		return ipam.Refuse(ipam.ErrEtagMismatch, "%s changed since it was read", refs[0].ID)
	}
	if err == nil {
		events := make([]ipam.Event, len(refs))
		for i, r := range refs {
			events[i] = ipam.Event{Ref: r, Rev: crev, Deleted: true}
		}
		a.idx.Apply(events, 0)
	}
	return err
}
