package access

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// recordingStream is a server stream that records what is sent on it.
type recordingStream struct {
	grpc.ServerStream
	sent *[]any
}

func (r recordingStream) SendMsg(m any) error {
	*r.sent = append(*r.sent, m)
	return nil
}

// A message encoded beforehand (grpc.PreparedMsg, as announcer snapshots
// are) cannot be checked: the guard sends it only on methods whose
// responses it does not check.
func TestGuardedStreamSendsUncheckedOnlyWhereNothingIsChecked(t *testing.T) {
	for _, tc := range []struct {
		acc  Access
		sent bool
	}{
		{Allow, true}, {OwnNode, true},
		{Own, false}, {OwnPools, false}, {OwnPool, false},
	} {
		var sent []any
		s := &guardedStream{ServerStream: recordingStream{sent: &sent}, g: &Guard{}, acc: tc.acc, method: "/m", ctx: context.Background()}
		err := s.SendMsg(&grpc.PreparedMsg{})
		if got := len(sent) == 1; got != tc.sent {
			t.Errorf("access %v: sent %v, want %v (error %v)", tc.acc, got, tc.sent, err)
		}
		if !tc.sent && status.Code(err) != codes.Internal {
			t.Errorf("access %v: error %v, want Internal", tc.acc, err)
		}
	}
}
