// Package redact hides what payload capture must not keep: the values of
// the JSON members the rules name (at any depth, and the text members of
// Responses API stream events), what the rules' patterns match, exact
// secrets, and credentials of every documented format listed in
// secrets.go, even when a stream split one across its events.
// Rules.Apply redacts a whole captured body (a JSON document, an event
// stream or text); Rules.Scrub hides credentials and secrets in text as
// it will be kept, such as a provider's error as the client gets it.
//
// It knows nothing of the ext_proc server, which adds its backends'
// credentials to the rules' Secrets. redacttest holds a sample of every
// credential format, for tests.
package redact
