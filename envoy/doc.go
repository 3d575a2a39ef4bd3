// Package envoy generates the Envoy bootstrap that puts modelgate in front
// of the configured backends, renders it as YAML, and validates any Envoy
// YAML strictly against go-control-plane's protos: unknown fields, PGV rules
// inside every typed_config, and the cross-references Envoy itself checks.
//
// The generated bootstrap has one listener whose HTTP connection manager
// runs the ext_proc filter and then the router. Its stream idle timeout
// outlasts every model's timeouts; an early header mutation removes the
// headers through which a client could steer the router (headers.go); and
// local_reply_config turns Envoy's own replies into OpenAI errors while
// leaving the ext_proc server's alone (localreply.go). Routes select a backend's
// cluster by the routing header the ext_proc server sets; a catch-all route
// answers 404 with an OpenAI-shaped JSON error. For production it also
// has an admin interface on loopback (/ready), a JSON access log with the
// token usage the ext_proc server reports, circuit breakers sized for the
// gateway rather than Envoy's 1,024, a gRPC health check of the ext_proc
// server, and use_remote_address for an Envoy at the edge.
// COMPATIBILITY.md says which Envoy releases run it and what differs;
// Config.EnvoyVersion makes Bootstrap refuse a release that lacks what the
// config needs (fallback needs 1.37, version.go).
//
// A model with fallback (routing.Model.Fallback) is served by Envoy's own
// retries: one cluster per model whose endpoints are its deployments, each
// at its priority and weight, with its backend's name in the endpoint's
// metadata. A route on the model header sends the model there with a
// retry policy that moves to the next priority
// (previous_priorities) and honours a 429's Retry-After up to a bound (a
// longer one is ignored, not capped); outlier detection ejects a failing
// deployment's address for a while. An ext_proc filter in the
// cluster's upstream filter chain runs once per attempt, after Envoy chose
// the endpoint, and translates the request for that deployment's provider.
// One cluster with priorities rather than an aggregate cluster of the
// backends' clusters: Envoy builds the upstream filter chain from the
// route's cluster, so an aggregate's children would not get the
// translating filter (envoyproxy/envoy#29318), and one cluster keeps
// priorities, ejection and previous_priorities in one load balancer, as
// Envoy AI Gateway does. The price: every endpoint of the cluster shares
// its connect timeout and protocol options, TLS is chosen per endpoint by
// transport_socket_matches (each https deployment gets its backend's own
// SNI and SAN), and a deployment whose name resolves to several addresses
// is several hosts to the load balancer and to outlier detection.
//
// Validation reports each Problem at a path of proto field names, such as
// static_resources.clusters[2].name, so that a hand-edited file can be fixed
// without reading Go code.
package envoy
