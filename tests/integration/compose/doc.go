// Package compose runs the compose lab's walk-through (deploy/compose/
// README.md) as a test: podman-compose brings the lab up from the images
// `make images` built, beaconctl (in its container) creates a pool, a BFD
// profile, a BGP peer and advertisements and allocates an address; FRR must
// show the route from both nodes with BFD up, the client must reach the
// address on its segment, and when the announcer that answers for it is
// killed the address must move to the other node while the client keeps
// reaching it. The lab is torn down at the end. `make test-compose` runs it
// (BEACON_COMPOSE=1, after `make images`); without that it skips, saying
// so, and with it a missing podman-compose, root or image fails it. It holds
// no code of its own. TestImages checks the images themselves: OCI labels,
// --version, the user each runs as.
package compose
