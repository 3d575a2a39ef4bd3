// Package wiring turns the configuration file (extproc/config) into what
// the Envoy bootstrap generator (envoy) takes. Neither package knows the
// other: `modelgate` wires them here, and the deployment checks of deploy/
// import this package so that they generate the very bootstrap the binary
// does.
package wiring
