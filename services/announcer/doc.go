// Package announcer is the root of announcerd's module: the per-node agent
// that subscribes to its plan from the IPAM and makes it so over BGP and
// ARP/NDP. The code lives in internal/ and cmd/.
package announcer
