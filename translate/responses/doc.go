// Package responses bridges OpenAI's Responses API to chat completions, so
// that every provider's chat translator also serves POST /v1/responses: a
// CreateResponse request becomes a chat completions request (instructions,
// message items, function calls and their outputs become messages), and
// the chat completion the provider's translator produced becomes a Response
// object with typed output items and Responses usage.
//
// Providers that serve the Responses API themselves get Passthrough
// instead: their events are relayed, made valid against the specification,
// with the gateway's response id and its stored conversation.
package responses
