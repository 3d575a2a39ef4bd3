// Package api is the OpenAI API as modelgate's clients see it, whatever
// provider serves them: parsing and validating client requests against
// the official OpenAPI document, the bodies and stream events the gateway
// answers with, and the OpenAI error object. Every translator builds its
// client-facing output from these types and functions.
//
// Its subpackage spec validates bodies and events against the OpenAPI
// document, for tests.
package api
