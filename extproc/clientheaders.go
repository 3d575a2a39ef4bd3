package extproc

import (
	"slices"

	"modelgate/translate"
)

// clientHeaders never reach a provider: the client's credentials (the
// gateway sets the provider's own instead), its OpenAI account headers and
// its cookies.
var clientHeaders = []string{"authorization", "proxy-authorization", "x-api-key", "api-key", "x-goog-api-key",
	"openai-organization", "openai-project", "cookie"}

// internalPrefix starts the headers only the gateway sets.
const internalPrefix = "x-modelgate-"

// strippedPrefixes start the request headers no client may send on: the
// gateway's own, and those of the providers' APIs, which would choose on
// the operator's account what the operator never enabled (api.LeftOut): a
// service tier, a latency or guardrail setting, temporary credentials, a
// Google project to bill, a beta. A translator sets what its provider
// needs. The dialects add their APIs' own (dialect.headerPrefix).
var strippedPrefixes = append([]string{internalPrefix, "x-amz-", "x-amzn-", "x-goog-"}, dialectPrefixes()...)

func dialectPrefixes() []string {
	var out []string
	for _, d := range dialects {
		out = append(out, d.headerPrefix)
	}
	return out
}

// stripInternal removes every header the client sent under
// strippedPrefixes, but the headers of its dialect's API the translators
// read (dialect.clientHeaders). The route cache is cleared with it,
// because Envoy chose the first route from the client's headers.
func stripInternal(hm headerMap, d *dialect) *headers {
	var h headers
	for _, k := range hm.prefixed(strippedPrefixes) {
		if !slices.Contains(d.clientHeaders, k) {
			h.Remove(k)
		}
	}
	return &h
}

// sentHeaders are the headers a request body's reply removes: the
// client's credentials and the dialect's clientHeaders its translator does
// not set, which would otherwise reach the provider as the client sent
// them (a beta the model does not enable).
func sentHeaders(d *dialect, up translate.Upstream) []string {
	out := clientHeaders[:len(clientHeaders):len(clientHeaders)] // a later Remove copies
	for _, name := range d.clientHeaders {
		if !slices.ContainsFunc(up.Headers, func(h translate.Header) bool { return h.Name == name }) {
			out = append(out, name)
		}
	}
	return out
}
