// Package extproc is modelgate's Envoy external processor: one gRPC stream
// per HTTP request, handled by a small per-stream state machine whose phases
// follow the ext_proc protocol (request headers, request body, response
// headers, response body).
//
// The request headers phase strips client-sent x-modelgate-* headers,
// dispatches on method and path, authenticates the API key and answers
// at once what the gateway serves itself: GET /v1/models and
// /v1/models/{model}, and GET and DELETE /v1/responses/{id} and GET
// /v1/responses/{id}/input_items from the account's stored responses.
// The request body phase validates the OpenAI
// request, picks a deployment, translates the body for the provider and
// points Envoy's router at the backend with a routing header and
// clear_route_cache. The response phases let the provider's translator
// rewrite the body, chunk by chunk for streams, and record usage at the end.
//
// A model with Fallback is routed by Envoy instead: the request body
// phase passes the client's body on untranslated, Envoy picks a
// deployment per attempt (priorities, retries, outlier ejection), an
// ext_proc stream per attempt from the model cluster's upstream filter
// chain translates the request for that deployment, and the response
// phases translate the answer of the deployment it names
// (x-modelgate-deployment). fallback.go has the details.
//
// Every error the client sees is an APIError rendered in one place as the
// OpenAI error object. Every answer, the gateway's own and the provider's,
// carries the request's x-request-id.
package extproc
