package l2_test

import (
	"os"
	"testing"

	"github.com/beaconlb/beacon/services/announcer/internal/l2/l2lab"
)

func TestMain(m *testing.M) {
	// The lab re-executes this binary inside node namespaces as responders.
	l2lab.RunHelperIfAsked()
	os.Exit(m.Run())
}
