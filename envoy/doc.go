// Package envoy generates the Envoy bootstrap that puts modelgate in front
// of the configured backends, renders it as YAML, and validates any Envoy
// YAML strictly against go-control-plane's protos: unknown fields, PGV rules
// inside every typed_config, and the cross-references Envoy itself checks.
//
// The generated bootstrap has one listener whose HTTP connection manager
// runs the ext_proc filter and then the router. Routes select a backend's
// cluster by the routing header the ext_proc server sets; a catch-all route
// answers 404 with an OpenAI-shaped JSON error. For production it also
// has an admin interface on loopback (/ready), a JSON access log with the
// token usage the ext_proc server reports, circuit breakers sized for the
// gateway rather than Envoy's 1,024, a gRPC health check of the ext_proc
// server, and use_remote_address for an Envoy at the edge.
// COMPATIBILITY.md says which Envoy releases run it and what differs.
//
// Validation reports each Problem at a path of proto field names, such as
// static_resources.clusters[2].name, so that a hand-edited file can be fixed
// without reading Go code.
package envoy
