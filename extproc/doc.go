// Package extproc is modelgate's Envoy external processor: one gRPC stream
// per HTTP request, handled by a small per-stream state machine whose phases
// follow the ext_proc protocol (request headers, request body, response
// headers, response body).
//
// It has two front doors: OpenAI's API, and Anthropic's Messages API
// (POST /v1/messages and /v1/messages/count_tokens). A dialect per front
// door (dialect.go) owns what the gateway does itself in that API: where
// the client's key is, the error body and the event that ends a failed
// stream, the model list and a model, the API's own request headers, and
// the metadata that has Envoy's own replies answer in its shape. The
// endpoint table names each endpoint's dialect; GET /v1/models and
// /v1/models/{model} take it from the request's headers.
//
// The request headers phase dispatches on method and path, authenticates
// the key and answers at once what the gateway serves itself: the model
// list and a model, and GET and DELETE /v1/responses/{id} and GET
// /v1/responses/{id}/input_items from the account's stored responses. The
// request body phase lets the endpoint's flow (flows.go) validate the
// request and route its model, admits it against rate limits and budgets,
// and has the forwarding translate the body for the provider and point
// Envoy's router at the backend with a routing header and
// clear_route_cache. The response phases let the provider's translator
// rewrite the body, chunk by chunk for streams, and record usage at the
// end.
//
// Translators say what they produced (translate.Reporter): the generated
// text in each piece of output and the reasons the answer ended. The
// server reads nothing of the client's bytes itself: the estimate of an
// answer cut short, the span's finish reasons and the capture's hidden
// text come from the report.
//
// An exchange is made of parts with their own methods (exchange.go): the
// stream base it shares with an attempt's stream (server, log, phase,
// request, flow, route, translator, the recover boundary), the request,
// the meter of rate limits and budgets, and the answer with its body mode.
// No interface takes the exchange, and the package's files form layers
// that never reference back up (structure_test.go).
//
// A model with Fallback is routed by Envoy instead: the request body
// phase passes the client's body on untranslated, Envoy picks a
// deployment per attempt (priorities, retries, outlier ejection), an
// ext_proc stream per attempt from the model cluster's upstream filter
// chain translates the request for that deployment, and the response
// phases translate the answer of the deployment it names
// (x-modelgate-deployment). fallback.go has the details.
//
// Every error the gateway answers with is an APIError, whose body its
// dialect renders: as the immediate response of errorResponse, or as the
// event that ends a stream. Every answer, the gateway's own and the
// provider's, carries the request's x-request-id.
package extproc
