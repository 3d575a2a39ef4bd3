// Package standin is an in-process stand-in for Envoy, for tests and
// `modelgate dev` on machines where no Envoy binary can run.
//
// It loads the same bootstrap a real Envoy would (one listener with an HTTP
// connection manager running the ext_proc filter and the router, static
// clusters, possibly with priorities, outlier detection and an upstream
// ext_proc filter) and behaves like current Envoy (1.37 and later), never
// more forgivingly; WithEnvoyVersion brings back the differences of 1.34
// to 1.36 that matter to the gateway (version.go). Configuration it does not implement is refused by New with
// an error; a request that asks for something it does not implement (a
// mode_override to BUFFERED_PARTIAL, FULL_DUPLEX_STREAMED or trailer
// processing, a streamed immediate response, an upgrade the filters let
// through to a backend: it does not tunnel) fails with a 500 whose details
// are standin_unimplemented{...}. It is a test and development
// tool; production traffic goes through Envoy.
//
// The rules it implements, and where they come from in Envoy (source files
// under source/, docs pages under configuration/ and intro/):
//
// ext_proc stream (extensions/filters/http/ext_proc/ext_proc.cc,
// processor_state.cc; API external_processor.proto):
//   - One gRPC stream per request, opened at the first message and shared
//     by both directions; protocol_config on the first message,
//     metadata_context on every one; header values in raw_value only.
//   - The stream is half-closed then cancelled when the request ends, after
//     an immediate response or an error, and as soon as nothing more will
//     be sent (closeGrpcStreamIfLastRespReceived, 1.37); replies that
//     arrive after that are dropped.
//   - Only the reply Envoy waits for is accepted; replies are matched to
//     sent messages in order. A reply of the wrong kind, an empty one, or
//     one that arrives while nothing is pending is spurious
//     (onReceiveMessage): status_on_error with details spurious_message or
//     unhandled_message, or, with failure_mode_allow, processing ends and
//     the request continues. An immediate response is honoured whenever it
//     arrives, also while the upstream is being waited for.
//   - A clean close continues without ext_proc; a gRPC error fails with
//     status_on_error and details ext_proc_error_gRPC_error_<code>{msg}
//     (onGrpcError); no reply within message_timeout (default 200ms) is a
//     504 with ext_proc_error_per-message_timeout_exceeded
//     (onMessageTimeout); override_message_timeout extends it once within
//     max_message_timeout. Details have whitespace replaced by '_'
//     (sendImmediateResponse).
//   - Large messages: the client has no practical size limit, as Envoy's
//     gRPC client has none by default.
//
// Bodies and headers (ext_proc.cc, processor_state.cc, mutation_utils.cc,
// http/filter_manager.cc):
//   - BUFFERED: one message with the whole body; over the buffer limit a
//     request gets 413 Payload Too Large and a response 500 Internal Server
//     Error (requestDataTooLarge, responseDataTooLarge). STREAMED: every
//     read is a message, pipelined, replies applied in order, the last one
//     an empty end_of_stream chunk (HTTP/1 codec), chunks that arrive
//     before the header reply coalesced, headers held until the first
//     chunk's reply.
//   - content-length is removed right after the headers message is sent,
//     with the modes in force then (shouldRemoveContentLength: STREAMED,
//     BUFFERED_PARTIAL, FULL_DUPLEX_STREAMED, BUFFERED with headers SKIP);
//     a mode_override in the reply does not remove it, but a content-length
//     set by the reply is skipped under the new modes. BUFFERED with
//     headers SEND keeps it, never recomputes it, and fails a body mutation
//     that does not match it. What is left goes upstream and downstream as
//     it is, also when it is wrong.
//   - Header mutations with the default mutation_rules; CONTINUE_AND_REPLACE;
//     mode_override with Envoy's rules; dynamic metadata into receiving
//     namespaces only.
//
// Routing and the router (common/router/router.cc, upstream_request.cc,
// config_impl.cc; route_components.proto):
//   - The route is chosen from the original headers and again only after a
//     reply with a header_mutation and clear_route_cache; no route is a 404
//     (route_not_found, NR). host_rewrite_literal, prefix_rewrite,
//     direct_response, request_headers_to_remove (applied after route
//     selection, finalizeRequestHeaders).
//   - Before any attempt the router edits the request's one header map
//     (finalizeRequestHeaders, FilterUtility::finalTimeout,
//     RetryStateImpl::create): request_headers_to_remove, host and prefix
//     rewrites (x-envoy-original-path), x-envoy-expected-rq-timeout-ms;
//     it consumes x-envoy-retry-on, x-envoy-max-retries,
//     x-envoy-retriable-status-codes and the x-envoy-upstream-rq-*-timeout-ms
//     headers (honoured) and the other retry headers (ignored). The access
//     log's %REQ% shows this map, upstream filters' edits included.
//   - Timeouts: the route timeout (default 15s, 0 disables) from the whole
//     request to the end of the response, over all attempts and back-offs:
//     504 "upstream request timeout", response_timeout, UT, no retry.
//     per_try_timeout (ignored if not below the route timeout) and
//     per_try_idle_timeout start when an attempt starts: Envoy starts them
//     when the request is complete and the attempt's pool is ready
//     (onPoolReady), at once with a pooled connection, before the upstream
//     filters run. Before the response is handed downstream either resets
//     the attempt, which may be retried (LocalReset: reset, 5xx,
//     gateway-error); the last one is a 504 upstream_per_try_timeout /
//     upstream_per_try_idle_timeout, UT. After that per_try_timeout is
//     ignored and per_try_idle_timeout, re-armed by every response byte,
//     cuts the response.
//   - Upstream failures before headers (onUpstreamReset, with the reset
//     reasons of http/codec_client.cc): connect failure 503 "upstream
//     connect error or disconnect/reset before headers. reset reason:
//     remote connection failure, transport failure reason: delayed connect
//     error: ..." (UF); a connection closed before any response byte 503
//     "... connection termination" (UC); after part of the headers 502
//     "... protocol error" (UPE); after a retry the body says "retried and
//     the latest reset reason". A reset after the headers is a protocol
//     error of the HTTP/1 codec: 502, upstream_reset_after_response_started
//     {protocol_error}, UPE. A DNS name without addresses is 503 "no
//     healthy upstream" (UH), never retried (Envoy would have no host).
//
// Retries (router.cc, retry_state_impl.cc, retry_policy_impl.cc,
// backoff_strategy.cc, extensions/retry/{priority/previous_priorities,
// host/previous_hosts}; route_components.proto RetryPolicy):
//   - A route's retry_policy: retry_on tokens 5xx, gateway-error, reset,
//     reset-before-request, connect-failure, retriable-4xx (409),
//     retriable-status-codes with retriable_status_codes, envoy-ratelimited
//     (then only x-envoy-ratelimited: true decides); refused-stream,
//     retriable-headers and http3-post-connect-failure never apply here;
//     unknown tokens are ignored, gRPC tokens refused. No retry_on, no
//     retries. num_retries defaults to 1.
//   - Retries are decided on the status and headers the upstream filters
//     left, and never once the response was handed to the downstream
//     filters (downstream_response_started_), even if the router-level
//     ext_proc holds it (BUFFERED). Each retry needs a slot of the
//     cluster's max_retries (default 3) or, with a retry_budget, of
//     budget_percent (20%) of its requests in flight, at least
//     min_retry_concurrency (3); else UO. Retries used up: URX.
//   - Back-off: random below an interval doubling from base_interval
//     (25ms) up to max_interval (10 × base); rate_limited_retry_back_off:
//     the first reset_headers entry (SECONDS or UNIX_TIMESTAMP) that
//     parses to at most its max_interval (default 300s) and is over 1ms,
//     jittered in [interval, 1.5 × interval), only for a response already
//     retriable; a larger value falls back to the exponential back-off.
//   - previous_priorities (update_frequency) recomputes the priority load
//     without the priorities tried, forgetting them when nothing is left;
//     previous_hosts rejects tried hosts, re-picking up to
//     host_selection_retry_max_attempts times, then takes the last pick.
//   - With a retry policy the body after the router-level filter is kept
//     and each attempt gets it whole; over the buffer limit
//     (per_connection_buffer_limit_bytes) there are no retries
//     (retry_or_shadow_abandoned).
//
// Upstream HTTP filters (upstream_request.{h,cc}, upstream_impl.cc
// ClusterInfoImpl, http_protocol_options.proto http_filters; ext_proc.cc
// as an upstream filter; Envoy's docs, "Upstream HTTP filters"):
//   - A cluster's HttpProtocolOptions.http_filters: ext_proc, then
//     upstream_codec, which must be last ("The codec filter is the only
//     valid terminal upstream HTTP filter"); other upstream filters
//     (header_mutation, buffer, lua, ...) are refused. Without filters the
//     chain is the codec.
//   - Every attempt gets a new filter, hence a new ext_proc stream,
//     cancelled when the attempt is abandoned. It works on the request's
//     one header map: what attempt N set or removed is still so at attempt
//     N+1, content-length included (BUFFERED with headers SEND keeps it).
//     The body is the attempt's own copy. auto_host_rewrite then sets
//     :authority to the host's hostname in that map (onPoolReady); the
//     upstream filter sees the previous value.
//   - Modes: request headers SEND or SKIP, request body NONE or BUFFERED,
//     response headers SEND or SKIP, response body NONE; no mode_override.
//     The response headers pass the filter before the router decides on
//     retries and outlier detection, and the status it leaves counts.
//   - request_attributes on the first message of each stream (under
//     envoy.filters.http.ext_proc, as evaluateAttributes makes them:
//     numbers, bools, and strings for the rest): upstream.request_attempt_count
//     (1, 2, ...), upstream.address, xds.cluster_name, xds.route_name,
//     xds.upstream_host_metadata.filter_metadata['ns']['key'] (the value),
//     and xds.upstream_host_metadata, a Metadata message, which Envoy
//     prints with ShortDebugString (filters/common/expr/evaluator.cc,
//     print): text format behind a goo.gle/debug* marker that protobuf adds
//     so that nobody parses it. Other attributes are refused.
//   - immediate_response, gRPC errors, message timeouts (504), spurious
//     replies and rejected mutations become a local reply of the
//     downstream stream, never retried, which goes through the router-level
//     ext_proc's response path and local_reply_config. clear_route_cache
//     is ignored; dynamic_metadata lands in the request's, shared with the
//     router-level filter, and forwarding_namespaces (untyped, either
//     filter) put that metadata, as it is at each message, in
//     metadata_context.
//
// Load balancing and outlier detection (load_balancer_impl.cc,
// outlier_detection_impl.cc; docs load_balancing/{priority,overprovisioning,
// panic_threshold}, outlier):
//   - Hosts come from every LocalityLbEndpoints: priority, the endpoint's
//     hostname (for a DNS cluster its DNS name when empty), metadata and
//     load_balancing_weight. Locality weights are ignored, as Envoy does
//     without locality_weighted_lb_config (refused). A STRICT_DNS endpoint
//     is one host per address of its name in dns_lookup_family
//     (strict_dns_cluster.cc, ResolveTarget), resolved once by New
//     (WithResolver); a name that does not resolve stays one host whose
//     connections fail (503 "no healthy upstream"). A LOGICAL_DNS
//     endpoint is one host, dialed by name.
//   - Priority load: a priority's availability is healthy hosts / hosts ×
//     the overprovisioning factor (1.4), capped at 100; the load goes to
//     priorities in order. Panic when the total is below 100 and a
//     priority's healthy share is below healthy_panic_threshold (default
//     50%): its hosts are used whatever their health; 0 disables it, and
//     with nothing available the request gets 503 "no healthy upstream",
//     no_healthy_upstream, UH (also on a retry).
//   - Each host's transport socket is the first transport_socket_matches
//     entry whose labels its envoy.transport_socket_match metadata has,
//     else the cluster's; UpstreamTlsContext with sni or auto_host_sni
//     (the host's hostname verbatim, a port included, which Go also
//     verifies, as auto_sni_san_validation does), a trusted CA, and
//     match_typed_subject_alt_names (exact DNS and IP SANs).
//   - ROUND_ROBIN and LEAST_REQUEST (two random choices, a full scan with
//     no more hosts than that); unequal host weights use Envoy's EDF
//     schedule (weight / (active + 1) for LEAST_REQUEST). Host state,
//     ejections and active counts are shared by every request of a Proxy.
//   - Outlier detection: consecutive_5xx and consecutive_gateway_failure
//     (and consecutive_local_origin_failure with
//     split_external_local_origin_errors) eject at the Nth error, with the
//     enforcing percentages as a chance, inline (Envoy posts to its main
//     thread); without split, connect failures count as 503 and timeouts as
//     the router's 504. max_ejection_percent counts the cluster's hosts;
//     always_eject_one_host lets the first ejection through anyway. A host
//     returns at an interval sweep once base_ejection_time × its backoff
//     (+1 per ejection, -1 per sweep it stayed in for an interval) capped
//     at max_ejection_time has passed. Success-rate and failure-percentage
//     detection are refused where they could act (enough hosts, enforced).
//   - Test hooks: WithClock (outlier times and sweeps, back-off waits, and
//     with a TimerClock the stream timers too), WithRandom (load balancing,
//     enforcing, jitter), WithBackOff and WithResolver.
//
// Local replies (http/filter_manager.cc sendLocalReply, http/utility.cc
// prepareLocalReply, http/conn_manager_impl.cc; HTTP connection manager
// docs: local_reply):
//   - Before the response started a local reply goes through the encoder
//     filters, so ext_proc's response path sees it (Envoy 1.37+), except
//     ext_proc's own immediate responses and failures. Once a filter holds
//     the response headers (BUFFERED, or STREAMED before the first chunk's
//     reply) it goes straight to the client; once headers went downstream
//     the stream is reset instead.
//   - A request body the HTTP/1 codec cannot parse, a malformed chunked
//     body (http1/codec_impl.cc dispatchSlice and sendProtocolError;
//     conn_manager_impl.cc handleCodecError): a 400 "Bad Request" local
//     reply with details http1.codec_error, then the connection closes;
//     the request gets the DPE flag after local_reply_config ran. While
//     ext_proc's response path would hold that reply (1.37 and later) the
//     processor is sent it and the stream is reset at once: the client
//     gets no answer (envoyproxy/envoy#29440). Framing is net/http's
//     chunked reader's, which refuses what Envoy's BalsaParser refuses
//     (INVALID_CHUNK_LENGTH, CHUNK_LENGTH_OVERFLOW) and, being stricter,
//     also bytes between a chunk's data and its CRLF, chunk lines over
//     4 KiB and bodies mostly made of chunk extensions. A body cut by the
//     client closing its connection is no codec error: the stream is reset
//     without an answer (downstream_remote_disconnect), as Envoy does on
//     a remote close.
//   - stream_idle_timeout (any header or data event restarts it) and
//     request_timeout (until the request went upstream or the response
//     started): 504 if the whole request was received, else 408; "stream
//     timeout" (stream_idle_timeout, SI) and "request timeout"
//     (request_overall_timeout).
//   - local_reply_config: the first matching mapper (status_code_filter,
//     response_flag_filter, metadata_filter on the dynamic metadata as it
//     is when the reply is made, and_filter, or_filter) sets its body, then adds
//     headers_to_add (%RESPONSE_CODE% still the original), then status_code,
//     then its body_format_override; otherwise the top-level body_format.
//     Formats: text_format_source.inline_string with %LOCAL_REPLY_BODY%,
//     %RESPONSE_CODE%, %RESPONSE_CODE_DETAILS%, %RESPONSE_FLAGS%. Then
//     content-length, and the format's content type for a changed body
//     unless the rewrite set one; an empty body has neither.
//   - Response flags go to the access-log Entry (%RESPONSE_FLAGS%).
//
// Connection manager headers (http/conn_manager_utility.cc,
// mutateRequestHeaders and cleanInternalHeaders; HTTP header manipulation
// docs, x-forwarded-for; http_connection_manager/config.h,
// InternalAddressConfig):
//   - The early header mutations run first: the header_mutation extension
//     removing headers by name (appending and remove_on_match are refused).
//   - x-envoy-internal is always removed. x-forwarded-proto is the
//     client's, or http when it sent none.
//   - Without use_remote_address, x-forwarded-for is left alone and the
//     client address is its entry xff_num_trusted_hops left of the last
//     one, else the peer; it counts for the internal check only when
//     x-forwarded-for holds that one address. With it, the client address
//     is the peer, or the entry xff_num_trusted_hops-1 left of the last;
//     the peer (the listener's address for a loopback peer) is appended to
//     x-forwarded-for; the address counts for the internal check when the
//     client sent no x-forwarded-for.
//   - A request is internal when that address is in
//     internal_address_config's cidr_ranges (an empty config: RFC 1918,
//     RFC 4193 and loopback; without one, no request is, as in Envoy 1.34
//     and later): it gets x-envoy-internal: true and keeps its x-envoy-*
//     headers. Every other request loses the router's control headers
//     (x-envoy-retry-on, x-envoy-max-retries, the timeout headers and the
//     rest of cleanInternalHeaders' list); an edge request (external, with
//     use_remote_address) also loses x-envoy-decorator-operation,
//     x-envoy-downstream-service-*, x-envoy-original-path and -host, gets
//     a new x-request-id and x-envoy-external-address.
//
// Access log (access_loggers/stream; access log docs, format
// dictionaries): one stdout or stderr logger with a json_format whose
// values are plain text or a single operator of START_TIME, REQ(a?b),
// RESPONSE_CODE, RESPONSE_CODE_DETAILS, RESPONSE_FLAGS, DURATION,
// BYTES_RECEIVED, BYTES_SENT, ROUTE_NAME, UPSTREAM_CLUSTER,
// DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT and DYNAMIC_METADATA(ns:key):
// typed values, null for what is not there. It is written when the
// request ends, to the process's stdout or stderr, unless WithAccessLog
// takes the entries (Entry.Line holds the line).
//
// Clusters (upstream/resource_manager_impl.h, conn_pool_base.cc):
//   - Circuit breakers of the DEFAULT priority (max_retries: see
//     Retries): past max_requests (and, for HTTP/1 clusters, past
//     max_connections plus max_pending_requests; 1024 each by default) a
//     backend request gets 503 "upstream connect error or
//     disconnect/reset before headers. reset reason: overflow",
//     upstream_reset_before_response_started{overflow}, UO; an ext_proc
//     stream is not opened, a gRPC UNAVAILABLE that fails closed. The
//     stand-in counts requests, not connections.
//   - gRPC health checks are accepted and not run, on a cluster with one
//     endpoint and the default panic threshold: Envoy then routes to it
//     whatever its health. The admin interface's address is accepted; no
//     admin interface is served.
//
// What it will not grow into. The stand-in runs one bootstrap, the one
// package envoy generates, as Envoy 1.37 runs it, so that tests and `modelgate
// dev` exercise the ext_proc server against Envoy's rules. It is not a
// proxy for production traffic, and it stays out of: dynamic
// configuration (xDS, ADS, RDS, runtime layers), the admin interface,
// health checking and DNS refresh, downstream TLS, HTTP/2 and HTTP/3
// codec behaviour, hot restart and draining, filters other than ext_proc
// and the router (upstream: ext_proc and the codec), Envoy Gateway's and
// Istio's translation of their APIs into Envoy configuration (the deploy
// package checks those manifests against the generated bootstrap), and
// releases before 1.34. What only a real Envoy can show belongs in the
// real-Envoy leg of the integration tests (package envoy/envoytest, with
// MODELGATE_TEST_ENVOY), not here.
package standin
