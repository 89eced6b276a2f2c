package lb

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

// watchOnly answers WatchAllocations with fixed messages, then an error;
// the rest of the interface is not used by Watch.
type watchOnly struct {
	ipamv1.AllocationServiceClient
	msgs  []*ipamv1.WatchAllocationsResponse
	end   error
	asked *ipamv1.WatchAllocationsRequest
}

func (w *watchOnly) WatchAllocations(_ context.Context, in *ipamv1.WatchAllocationsRequest, _ ...grpc.CallOption) (grpc.ServerStreamingClient[ipamv1.WatchAllocationsResponse], error) {
	w.asked = in
	return &fixedStream{msgs: w.msgs, end: w.end}, nil
}

type fixedStream struct {
	grpc.ServerStreamingClient[ipamv1.WatchAllocationsResponse]
	msgs []*ipamv1.WatchAllocationsResponse
	end  error
}

func (s *fixedStream) Recv() (*ipamv1.WatchAllocationsResponse, error) {
	if len(s.msgs) == 0 {
		return nil, s.end
	}
	m := s.msgs[0]
	s.msgs = s.msgs[1:]
	return m, nil
}

func TestWatch(t *testing.T) {
	ev := func(typ ipamv1.AllocationEvent_Type, owner string, addrs ...string) *ipamv1.AllocationEvent {
		return &ipamv1.AllocationEvent{Type: typ, Allocation: &ipamv1.Allocation{Owner: owner, Addresses: addrs}}
	}
	msgs := []*ipamv1.WatchAllocationsResponse{
		{Events: []*ipamv1.AllocationEvent{ev(ipamv1.AllocationEvent_TYPE_EXISTING, "ns/a", "192.0.2.1")}, ResumeToken: "t1", SnapshotComplete: true},
		{Events: []*ipamv1.AllocationEvent{ev(ipamv1.AllocationEvent_TYPE_PUT, "ns/b", "192.0.2.2")}, ResumeToken: "t2"},
		{Events: []*ipamv1.AllocationEvent{ev(ipamv1.AllocationEvent_TYPE_DELETED, "ns/a", "192.0.2.1")}, ResumeToken: "t3"},
	}
	wantChanges := []Change{
		{Owner: "ns/a", Addresses: []string{"192.0.2.1"}, Snapshot: true},
		{SnapshotDone: true},
		{Owner: "ns/b", Addresses: []string{"192.0.2.2"}},
		{Owner: "ns/a", Deleted: true},
	}
	for _, tc := range []struct {
		name      string
		end       error
		wantToken string
		wantErr   func(error) bool
	}{
		{"broken stream keeps the last token", status.Error(codes.Unavailable, "gone"), "t3", func(err error) bool {
			var e *Error
			return errors.As(err, &e) && e.Retryable()
		}},
		{"too old token is dropped", status.Error(codes.OutOfRange, "compacted"), "", func(err error) bool { return errors.Is(err, ErrResumeTooOld) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := &watchOnly{msgs: msgs, end: tc.end}
			var got []Change
			token, err := New(fake, "c1", Options{}).Watch(context.Background(), "t0", func(ch Change) { got = append(got, ch) })
			if !tc.wantErr(err) {
				t.Errorf("error = %v", err)
			}
			if token != tc.wantToken {
				t.Errorf("token = %q, want %q", token, tc.wantToken)
			}
			if diff := cmp.Diff(wantChanges, got); diff != "" {
				t.Errorf("changes (-want +got):\n%s", diff)
			}
			if fake.asked.GetParent() != "tenants/c1" || fake.asked.GetResumeToken() != "t0" {
				t.Errorf("asked %v", fake.asked)
			}
		})
	}
}
