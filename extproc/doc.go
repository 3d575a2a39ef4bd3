// Package extproc is modelgate's Envoy external processor: one gRPC stream
// per HTTP request, handled by a small per-stream state machine whose phases
// follow the ext_proc protocol (request headers, request body, response
// headers, response body).
//
// The request headers phase strips client-sent x-modelgate-* headers,
// dispatches on method and path, authenticates the API key and answers
// GET /v1/models at once. The request body phase validates the OpenAI
// request, picks a deployment, translates the body for the provider and
// points Envoy's router at the backend with a routing header and
// clear_route_cache. The response phases let the provider's translator
// rewrite the body, chunk by chunk for streams, and record usage at the end.
//
// Every error the client sees is an APIError rendered in one place as the
// OpenAI error object.
package extproc
