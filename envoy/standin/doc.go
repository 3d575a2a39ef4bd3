// Package standin is an in-process stand-in for Envoy, for tests and
// `modelgate dev` on machines where no Envoy binary can run.
//
// It loads the same bootstrap a real Envoy would (one listener with an HTTP
// connection manager running the ext_proc filter and the router, static
// clusters) and behaves like current Envoy (1.37 and later), never more
// forgivingly. Configuration it does not implement is refused by New with
// an error; a request that asks for something it does not implement (a
// mode_override to BUFFERED_PARTIAL, FULL_DUPLEX_STREAMED or trailer
// processing, a streamed immediate response) fails with a 500 whose
// details are standin_unimplemented{...}. It is a test and development
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
//   - Timeouts: the route timeout (default 15s, 0 disables) from the whole
//     request to the end of the response, 504 "upstream request timeout",
//     response_timeout, UT. retry_policy with num_retries 0 only:
//     per_try_timeout from the moment the request went upstream until the
//     response headers (ignored if not below the route timeout), and
//     per_try_idle_timeout re-armed by every response byte; 504
//     upstream_per_try_timeout / upstream_per_try_idle_timeout, UT.
//   - Upstream failures before headers (onUpstreamReset, with the reset
//     reasons of http/codec_client.cc): connect failure 503 "upstream
//     connect error or disconnect/reset before headers. reset reason:
//     remote connection failure, transport failure reason: delayed connect
//     error: ..." (UF); a connection closed before any response byte 503
//     "... connection termination" (UC); after part of the headers 502
//     "... protocol error" (UPE). A reset after the headers is a protocol
//     error of the HTTP/1 codec: 502, upstream_reset_after_response_started
//     {protocol_error}, UPE.
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
//   - stream_idle_timeout (any header or data event restarts it) and
//     request_timeout (until the request went upstream or the response
//     started): 504 if the whole request was received, else 408; "stream
//     timeout" (stream_idle_timeout, SI) and "request timeout"
//     (request_overall_timeout).
//   - local_reply_config: the first matching mapper (status_code_filter,
//     response_flag_filter, and_filter, or_filter) sets its body, then adds
//     headers_to_add (%RESPONSE_CODE% still the original), then status_code,
//     then its body_format_override; otherwise the top-level body_format.
//     Formats: text_format_source.inline_string with %LOCAL_REPLY_BODY%,
//     %RESPONSE_CODE%, %RESPONSE_CODE_DETAILS%, %RESPONSE_FLAGS%. Then
//     content-length, and the format's content type for a changed body
//     unless the rewrite set one; an empty body has neither.
//   - Response flags go to the access-log Entry (%RESPONSE_FLAGS%).
//
// Connection manager headers (http/conn_manager_utility.cc,
// mutateRequestHeaders; HTTP header manipulation docs, x-forwarded-for):
//   - No client is internal, as in Envoy 1.33 and later without
//     internal_address_config (which is refused): x-envoy-internal is
//     always removed. x-forwarded-proto is the client's, or http when it
//     sent none.
//   - Without use_remote_address, x-forwarded-for is left alone and the
//     client address is its entry xff_num_trusted_hops left of the last
//     one, else the peer. With it, every request is an edge request: the
//     client address is the peer, or the entry xff_num_trusted_hops-1 left
//     of the last; the peer (the listener's address for a loopback peer)
//     is appended to x-forwarded-for; x-request-id is replaced, the
//     client's x-envoy-* headers are dropped (Envoy drops a fixed list of
//     them), x-envoy-external-address is set, and x-forwarded-proto is
//     http unless a trusted hop set it.
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
//   - Circuit breakers of the DEFAULT priority: past max_requests (and, for
//     HTTP/1 clusters, past max_connections plus max_pending_requests;
//     1024 each by default) a backend request gets 503 "upstream connect
//     error or disconnect/reset before headers. reset reason: overflow",
//     upstream_reset_before_response_started{overflow}, UO; an ext_proc
//     stream is not opened, a gRPC UNAVAILABLE that fails closed. The
//     stand-in counts requests, not connections.
//   - gRPC health checks are accepted and not run: with one endpoint,
//     Envoy's default panic threshold routes to it whatever its health
//     (common_lb_config is refused). The admin interface's address is
//     accepted; no admin interface is served.
package standin
