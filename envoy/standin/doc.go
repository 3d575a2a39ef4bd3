// Package standin is an in-process stand-in for Envoy, for tests and
// `modelgate dev` on machines where no Envoy binary can run.
//
// It loads the same bootstrap a real Envoy would (one listener with an HTTP
// connection manager running the ext_proc filter and the router, static
// clusters) and plays Envoy's side of the ext_proc protocol as
// shared/docs/ENVOY_EXTPROC.md §8.1 specifies: one gRPC stream per request,
// raw_value headers, BUFFERED and STREAMED bodies cut at arbitrary points
// with the empty final chunk, route re-selection only after
// clear_route_cache, Envoy's header-mutation and content-length rules,
// immediate responses, mode_override, dynamic metadata, and Envoy's
// statuses for spurious replies (500), timeouts (504) and buffer limits
// (413/500).
//
// Configuration it does not implement is refused by New with an error,
// never silently accepted. It is a test and development tool; production
// traffic goes through Envoy.
package standin
