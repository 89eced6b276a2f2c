// Package gateway is the root of gatewayd's module: Beacon's front door
// (TLS, authentication, tenant authorization, limits, REST/JSON and the web
// console) in front of the IPAM replicas. The code lives in internal/ and
// cmd/.
package gateway
