// Package openai holds the canonical OpenAI API side of the gateway: parsing
// and validating client requests against the official OpenAPI document, the
// OpenAI error object, and the chat translator for backends that already
// speak the OpenAI API (provider "openai" and "openai-compatible").
//
// Translation keeps per-chunk work small: stream chunks are edited at the
// top level of their JSON object, never decoded into full structs.
package openai
