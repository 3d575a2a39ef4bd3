// Package openai is the provider translator for servers that already
// speak the OpenAI API: OpenAI itself and the OpenAI-compatible family
// (Mistral, Groq, DeepSeek, xAI, Together, vLLM, Ollama, …), whose
// departures from OpenAI's API are data (Quirks) beside it.
//
// Translation keeps per-chunk work small: stream chunks are edited at the
// top level of their JSON object, never decoded into full structs.
package openai
