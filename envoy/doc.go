// Package envoy generates the Envoy bootstrap that puts modelgate in front
// of the configured backends, renders it as YAML, and validates any Envoy
// YAML strictly against go-control-plane's protos: unknown fields, PGV rules
// inside every typed_config, and the cross-references Envoy itself checks.
//
// The generated bootstrap has one listener whose HTTP connection manager
// runs the ext_proc filter and then the router. Routes select a backend's
// cluster by the routing header the ext_proc server sets; a catch-all route
// answers 404 with an OpenAI-shaped JSON error.
//
// Validation reports each Problem at a path of proto field names, such as
// static_resources.clusters[2].name, so that a hand-edited file can be fixed
// without reading Go code.
package envoy
