package extproc

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/structpb"

	"modelgate/envoy/routing"
	"modelgate/translate"
	"modelgate/translate/jsonscan"
	"modelgate/translate/providers"
)

// Cross-provider fallback by Envoy's own machinery (Model.Fallback; the
// Envoy rules it relies on are in envoy/standin's doc.go, "Retries" and
// "Upstream HTTP filters"). A request for a Fallback model opens several
// ext_proc streams on this server:
//
//   - The router-level stream authenticates, admits rate limits and routes
//     the model without picking a deployment. It sets x-modelgate-model
//     (and x-modelgate-stream), which select the model's route and cluster,
//     sets no routing header, removes the client's credentials and passes
//     the client's OpenAI body on unchanged, keeping the parsed request. It
//     also writes the request's context as dynamic metadata (namespace
//     Config.MetadataNamespace: request_path, request_content_type,
//     account_id), because Envoy keeps ONE request header map for all
//     attempts and the first attempt overwrites :path and content-type.
//   - One upstream stream per attempt, from the ext_proc filter in the
//     model cluster's upstream filter chain. It is recognised by request
//     attribute xds.upstream_host_metadata in its first message, which
//     names the deployment Envoy chose (filter_metadata[namespace].backend).
//     It translates the client's body for that backend's provider as the
//     router-level stream does for other models (credential included),
//     sets :path, and removes every header an earlier attempt for another
//     provider may have set. On the attempt's response headers it adds
//     x-modelgate-deployment: <backend>, which reaches the client too.
//   - The router-level stream then sees one answer (the final attempt's, or
//     one of Envoy's own replies) and translates it with the translator of
//     the backend x-modelgate-deployment names.
//
// An error in an upstream stream (a request the chosen provider refuses to
// translate, a credential that cannot be minted) is an immediate response
// in the OpenAI error shape, marked with x-modelgate-upstream-reply. Envoy
// does not retry such a reply on another deployment: local replies of
// upstream filters are final (Envoy's http_protocol_options.proto,
// http_filters: "Local errors sent by upstream filters will not trigger
// retries"). The router-level stream passes it on.

// Headers of the fallback machinery.
const (
	// deploymentHeader names the backend that answered, on the response.
	deploymentHeader = "x-modelgate-deployment"
	// attemptReplyHeader marks an upstream stream's own error reply; its
	// value is the reply's details.
	attemptReplyHeader = "x-modelgate-upstream-reply"
)

// What Envoy sends an upstream stream (ext_proc.cc, evaluateAttributes):
// request attributes under the ext_proc filter's fixed key, as a Struct from the expression
// text to its value.
const (
	extProcAttributes     = "envoy.filters.http.ext_proc"
	hostMetadataAttribute = "xds.upstream_host_metadata"
	attemptCountAttribute = "upstream.request_attempt_count"
	// backendMetadataKey names the backend in the endpoint metadata of a
	// model cluster (envoy.BackendMetadataKey).
	backendMetadataKey = "backend"
)

// Keys of the request context the router-level stream writes as dynamic
// metadata for the upstream streams.
const (
	contextPath        = "request_path"
	contextContentType = "request_content_type"
	contextAccount     = "account_id"
	// contextClientID is the x-request-id the client sent: the attempt's
	// own header is the gateway's request id.
	contextClientID = "client_request_id"
)

// attemptHeaderNames are the request headers an attempt removes unless it
// sets them itself: the client's credentials and every header a provider
// declares its translators set (credentials, API versions, signatures).
var attemptHeaderNames = sync.OnceValue(func() []string {
	names := append(slices.Clone(clientHeaders), providers.RequestHeaders()...)
	slices.Sort(names)
	return slices.Compact(names)
})

// fallbackRoute routes a Fallback model at the router level: Envoy picks
// the deployment. Every deployment must serve the endpoint, since an
// attempt that cannot is a final error, never a fallback.
func (s *Server) fallbackRoute(m *routing.Model, ep endpoint) (route, error) {
	for _, d := range m.Deployments {
		if !ep.spec().serves(s.providers[s.router.backends[d.Backend].Provider]) {
			return route{}, errEndpointNotSupported(m.ID, ep)
		}
	}
	_, timeouts := s.router.target(m, firstDeployment(m))
	return route{timeouts: timeouts, via: viaEnvoy{m}}, nil
}

// viaEnvoy routes a Fallback model's request through Envoy, which picks
// the deployment attempt by attempt.
type viaEnvoy struct{ model *routing.Model }

func (viaEnvoy) translator(*route, builder) (translate.Translator, error) { return nil, nil } // built for the deployment that answers

// unanswered: Envoy's 503 after every attempt failed is recorded too.
func (viaEnvoy) unanswered() bool { return true }

// prepare estimates a Fallback model's request from the client's body,
// which goes to Envoy unchanged, and bounds its answer by the most any
// deployment would be sent.
func (v viaEnvoy) prepare(s *Server, r *request, _ translate.Translator, body []byte) (translate.Upstream, error) {
	if !r.endpoint.spec().form {
		r.prompt = promptEstimate(body)
	}
	if r.auto { // the attempts route the model the body names: the candidate (choose keeps forms from here)
		if r.changedBody != nil {
			body = r.changedBody
		}
		r.changedBody = withModel(body, r.model)
	}
	if r.maxOutput == 0 && r.endpoint.spec().generates {
		r.maxOutput = v.outputBound(s)
	}
	return translate.Upstream{}, nil
}

// send hands the client's body to Envoy unchanged (but for what the
// gateway changed: request.changedBody), with the model's route headers
// and the request's context for the upstream streams.
func (v viaEnvoy) send(s *Server, r *request, _ *route, _ translate.Upstream) (*extprocv3.ProcessingResponse, error) {
	h := headers{remove: clientHeaders[:len(clientHeaders):len(clientHeaders)]} // a later Remove copies
	h.Set("accept-encoding", "identity")
	h.Set(routing.ModelHeader, r.model)
	if r.stream {
		h.Set(routing.StreamHeader, "1")
	}
	rc, err := structpb.NewStruct(map[string]any{
		contextPath:        r.path,
		contextContentType: r.contentType,
		contextAccount:     r.principal.AccountID,
		contextClientID:    r.clientID,
	})
	if err != nil { // cannot happen: strings only
		return nil, err
	}
	var body *extprocv3.BodyMutation
	if r.changedBody != nil { // what the gateway changed: the attempts take the request apart again
		h.SetInt("content-length", int64(len(r.changedBody)))
		body = bodyMutation(r.changedBody)
	}
	return &extprocv3.ProcessingResponse{
		Response: &extprocv3.ProcessingResponse_RequestBody{RequestBody: &extprocv3.BodyResponse{
			Response: &extprocv3.CommonResponse{HeaderMutation: h.mutation(), BodyMutation: body, ClearRouteCache: true},
		}},
		DynamicMetadata: &structpb.Struct{Fields: map[string]*structpb.Value{
			s.cfg.MetadataNamespace: structpb.NewStructValue(rc),
		}},
	}, nil
}

// outputBound is the most a deployment of the Fallback model may
// be sent as the bound on an answer whose client sets none (Anthropic's
// required max_tokens, else Config.DefaultOutputTokens): Envoy picks the
// deployment after admission.
func (v viaEnvoy) outputBound(s *Server) int64 {
	out := s.cfg.DefaultOutputTokens
	for _, d := range v.model.Deployments {
		if def := s.providers[s.router.backends[d.Backend].Provider].DefaultMaxOutput; def != nil {
			out = max(out, def(d.Model))
		}
	}
	return out
}

// answered builds, for the router-level stream of a Fallback model, the
// translator of the deployment that answered, and routes rt to it. The
// answer is not a provider's translated one when it is an upstream
// stream's error (passed on) or a reply of Envoy's without the
// local-reply mark (answered as Envoy's own replies are); Envoy's marked
// replies go on to the fault path.
func (v viaEnvoy) answered(s *Server, r *request, rt *route, hm headerMap, envoyReply bool) answerPlan {
	if _, ok := hm.lookup(attemptReplyHeader); ok {
		return answerPlan{attemptReply: true}
	}
	if envoyReply {
		return answerPlan{}
	}
	backend, ok := hm.lookup(deploymentHeader)
	if !ok {
		return answerPlan{envoyReply: true}
	}
	d, ok := deploymentOn(v.model, backend)
	if !ok {
		return answerPlan{err: errUpstream(fmt.Errorf("the answer names deployment %q, not one of model %q's", backend, r.model))}
	}
	target, timeouts := s.router.target(v.model, d)
	p := s.providers[target.Provider]
	tr, err := rt.build(p, target)
	if err != nil {
		return answerPlan{err: err}
	}
	r.prompt = 0 // admitted with the client's body; promptTokens estimates the deployment's
	rt.target, rt.provider, rt.timeouts = target, p, timeouts
	return answerPlan{tr: tr}
}

// apply carries out the plan; a reply when the answer is not a
// provider's to translate, nil to go on.
func (p answerPlan) apply(ex *exchange, status int, eos bool) *extprocv3.ProcessingResponse {
	switch {
	case p.err != nil:
		return ex.fail(p.err)
	case p.attemptReply:
		ex.answer.status, ex.answer.completed, ex.phase = status, true, phaseDone
		ex.log.Warn("an attempt failed in the gateway; Envoy does not retry it", zap.Int("status", status))
		return attemptReplyHeaders()
	case p.envoyReply:
		apiErr, reached := envoyError(&ex.req, &ex.route, ex.tr != nil, status, p.details)
		ex.log.Warn("envoy answered locally", zap.Int("status", status), zap.String("details", p.details))
		ex.phase = phaseResponseBody
		if eos {
			ex.phase = phaseDone
		}
		return ex.answer.envoyReplied(apiErr, reached, status)
	case p.tr != nil:
		ex.tr = p.tr
		ex.log.with(zap.String("backend", ex.route.target.Backend), zap.String("provider", ex.route.target.Provider))
	}
	return nil
}

// attemptReplyHeaders passes on an upstream stream's error, already the
// OpenAI error (local_reply_config may have rewritten a 500's body, also
// to one), without the marks. Its body, if any, passes unchanged (settledBody).
func attemptReplyHeaders() *extprocv3.ProcessingResponse {
	var mut headers
	mut.Remove(attemptReplyHeader)
	mut.Remove(routing.LocalReplyHeader)
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseHeaders{
		ResponseHeaders: &extprocv3.HeadersResponse{Response: &extprocv3.CommonResponse{HeaderMutation: mut.mutation()}},
	}}
}

// withModel is a JSON request body with model as its model: each
// top-level model member's value replaced, every other byte kept. It is
// jsonscan.SetString but for the key, which it matches as encoding/json
// does, in any case (modelKey): the attempts parse the body so.
func withModel(body []byte, model string) []byte {
	members, ok := jsonscan.Members(body, nil)
	if !ok {
		return body
	}
	out := make([]byte, 0, len(body)+len(model))
	last := 0
	for _, m := range members {
		if !modelKey(m.Key) {
			continue
		}
		out = append(out, body[last:m.VS]...)
		out = jsonscan.AppendQuoted(out, model)
		last = m.VS + len(m.Value)
	}
	return append(out, body[last:]...)
}

// modelKey reports whether a JSON decoder takes key (raw, as between its
// quotes) for the model member: "model", "Model", "mod\u0065l".
func modelKey(key []byte) bool {
	if !jsonscan.KeyMayMean(key, "model") {
		return false
	}
	var k string
	return json.Unmarshal(append(append([]byte{'"'}, key...), '"'), &k) == nil && strings.EqualFold(k, "model")
}
