package envoy

import (
	mutationv3 "github.com/envoyproxy/go-control-plane/envoy/config/common/mutation_rules/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	earlyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/http/early_header_mutation/header_mutation/v3"
)

// RouterControlHeaders are the request headers through which a client
// could steer Envoy's router: its retries (x-envoy-retry-on with
// x-envoy-max-retries would retry against providers on routes that have
// none, and add fallback attempts) and its timeouts. The router reads them
// in its decodeHeaders (router.cc: FilterUtility::finalTimeout, then
// RetryStateImpl::create in continueDecodeHeaders), after every HTTP
// filter, so the ext_proc server, which may not touch x-envoy-* headers,
// cannot remove them, and a route's request_headers_to_remove comes too
// late for the timeout headers (finalTimeout runs before
// finalizeRequestHeaders).
//
// The connection manager already strips this list from every request it
// does not count as internal (conn_manager_utility.cc,
// cleanInternalHeaders), and without internal_address_config Envoy 1.34
// and later count no request as internal. An Envoy that marks clients
// internal (internal_address_config, as meshes set, or the 1.34–1.36
// runtime guard explicit_internal_address_config turned off, which counts
// RFC 1918 and loopback addresses, or a forged x-forwarded-for naming
// one, as internal) keeps them. So the bootstrap removes them itself with
// an early header mutation, which the connection manager runs before
// anything else (mutateRequestHeaders: first the
// early_header_mutation_extensions, then the internal check, route
// selection and the filter chain). Exact names, not a prefix matcher:
// remove_on_match is Envoy 1.36 and later.
var RouterControlHeaders = []string{
	"x-envoy-retry-on",
	"x-envoy-retry-grpc-on",
	"x-envoy-max-retries",
	"x-envoy-retriable-status-codes",
	"x-envoy-retriable-header-names",
	"x-envoy-hedge-on-per-try-timeout",
	"x-envoy-upstream-rq-timeout-ms",
	"x-envoy-upstream-rq-per-try-timeout-ms",
	"x-envoy-upstream-rq-timeout-alt-response",
	"x-envoy-expected-rq-timeout-ms",
	"x-envoy-upstream-stream-duration-ms",
	"x-envoy-upstream-alt-stat-name",
	"x-envoy-force-trace",
	"x-envoy-ip-tags",
	"x-envoy-original-url",
}

// earlyHeaderMutationName is the extension that removes them.
const earlyHeaderMutationName = "envoy.http.early_header_mutation.header_mutation"

// earlyHeaderMutations remove RouterControlHeaders before the connection
// manager looks at the request.
func earlyHeaderMutations() []*corev3.TypedExtensionConfig {
	m := &earlyv3.HeaderMutation{}
	for _, h := range RouterControlHeaders {
		m.Mutations = append(m.Mutations, &mutationv3.HeaderMutation{Action: &mutationv3.HeaderMutation_Remove{Remove: h}})
	}
	return []*corev3.TypedExtensionConfig{{Name: earlyHeaderMutationName, TypedConfig: mustAny(m)}}
}
