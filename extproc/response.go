package extproc

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/structpb"

	"modelgate/envoy/routing"
	"modelgate/extproc/guard"
	"modelgate/translate"
	"modelgate/translate/api"
)

// The headers of an answer that name what served it: the configured
// model the client's name resolved to (an auto model's choice), and the
// provider's own id of it. The answer's model member is the client's.
const (
	resolvedModelHeader = "x-modelgate-resolved-model"
	providerModelHeader = "x-modelgate-provider-model"
	// openAIModelHeader is OpenAI's name of the model that answered,
	// which the answer gives as the client's too.
	openAIModelHeader = "openai-model"
)

// responseHeaders lets the translator decide the client-facing head and
// switches successful streams to STREAMED. Envoy's own replies become the
// gateway's errors: those the bootstrap's local_reply_config marks, and,
// where the server asks for the response attribute (Envoy Gateway, which
// has no local_reply_config to mark them), every response whose
// response.code_details is not via_upstream.
func (ex *exchange) responseHeaders(h *extprocv3.HttpHeaders, attrs map[string]*structpb.Struct) *extprocv3.ProcessingResponse {
	hm := readHeaders(h.GetHeaders())
	status, _ := strconv.Atoi(hm.get(":status"))
	details, envoyReply := hm.lookup(routing.LocalReplyHeader)
	if !envoyReply {
		details, envoyReply = localReplyDetails(attrs)
	}
	if ex.tr == nil {
		plan := ex.route.via.answered(ex.s, &ex.req, &ex.route, hm, envoyReply)
		if resp := plan.apply(ex, status, h.GetEndOfStream()); resp != nil {
			return resp
		}
	}
	if envoyReply {
		return answerPlan{envoyReply: true, details: details}.apply(ex, status, h.GetEndOfStream())
	}
	ex.answer.status = status
	resp := &extprocv3.ProcessingResponse_ResponseHeaders{ResponseHeaders: &extprocv3.HeadersResponse{}}
	out := &extprocv3.ProcessingResponse{Response: resp}
	if ex.tr == nil { // a reply of Envoy's for a request never routed: bodyPass
		ex.phase, ex.answer.completed = phaseDone, true
		return out
	}
	ex.answer.head = ex.tr.ResponseHeaders(ex.answer.status, hm.get("content-type"))
	if ex.answer.head.Stream && !ex.req.stream && ex.answer.status/100 == 2 {
		// A stream the client did not ask for would reach it as a 200 it
		// cannot read.
		return ex.fail(errUpstream(fmt.Errorf("the provider answered a request for JSON with %q", hm.get("content-type"))))
	}
	if h.GetEndOfStream() { // no body will follow: translate the empty one now
		return ex.emptyBody()
	}
	var mut headers
	if ex.meter.limit != nil {
		mut.reserve(10) // content-type, six x-ratelimit-*, :status, the two models
	} else {
		mut.reserve(4) // content-type, :status, the two models
	}
	if ct := hm.get("content-type"); ct != ex.answer.head.ContentType {
		mut.Set("content-type", ex.answer.head.ContentType)
	}
	if w := api.JoinWarnings(ex.req.warning, ex.answer.head.Warning); w != "" {
		mut.Set(translate.WarningHeader, w)
	}
	// The answer's model is the name the client asked for; these name
	// what served it.
	mut.Set(resolvedModelHeader, ex.req.model)
	mut.Set(providerModelHeader, ex.route.target.Model)
	if _, ok := hm.lookup(openAIModelHeader); ok { // Codex warns "model rerouted" at any other name than its own
		mut.Set(openAIModelHeader, ex.req.requested)
	}
	rateHeaders(ex.meter.limit, &mut)
	if skipped := skippedRules(ex.req.guards); skipped != "" {
		mut.Set(guardSkippedHeader, skipped)
	}
	if ex.answer.head.Status != ex.answer.status {
		mut.Set(":status", strconv.Itoa(ex.answer.head.Status))
		ex.answer.status = ex.answer.head.Status // the ledger, metrics and log say what the client got
	}
	ex.answer.mode = bodyTranslate
	if len(ex.s.responseRules) > 0 { // no closure made for an exchange no rule reads
		ex.answer.body.guard = ex.s.guardAnswer(&ex.req, ex.answer.status, ex.answer.head.Stream, func() translate.Usage {
			u, _ := ex.answer.usageToCharge(&ex.req, ex.tr)
			return u
		})
	}
	switch {
	case ex.answer.head.Stream:
		ex.answer.mode, ex.answer.at.lastChunk = bodyStream, ex.s.now() // the stream's silence counts from its head
		mut.Remove("content-length")
		out.ModeOverride = streamedOverride()
	case gatherable(ex.answer.status, hm, ex.s.cfg.MaxBufferedResponseBytes):
		// Envoy's buffer would fail it with an empty 500: the server
		// gathers the body from a stream instead.
		ex.answer.mode = bodyGather
		mut.Remove("content-length")
		out.ModeOverride = streamedOverride()
	}
	resp.ResponseHeaders.Response = &extprocv3.CommonResponse{HeaderMutation: mut.mutation()}
	ex.phase = phaseResponseBody
	return out
}

// gatherable reports a successful buffered JSON answer that may outgrow
// Envoy's buffer: of unknown length or over the buffered limit. (40 MB of
// embeddings are legitimate; Envoy Gateway buffers 32 KiB by default.)
func gatherable(status int, hm headerMap, buffered int64) bool {
	if status/100 != 2 {
		return false
	}
	if translate.MediaType(hm.get("content-type")) != "application/json" {
		return false // not JSON: buffered, so its 502 can still be told
	}
	cl, err := strconv.ParseInt(hm.get("content-length"), 10, 64)
	return err != nil || cl > buffered
}

// emptyBody answers response headers that end the response: the
// translation of an empty body replaces it whole.
func (ex *exchange) emptyBody() *extprocv3.ProcessingResponse {
	out, err := ex.tr.ResponseBody(nil, true)
	if err != nil {
		return ex.fail(err)
	}
	ex.phase, ex.answer.completed, ex.answer.status = phaseDone, true, ex.answer.head.Status
	var h headers
	h.Set("content-type", ex.answer.head.ContentType)
	rateHeaders(ex.meter.limit, &h)
	return localReply(ex.answer.head.Status, &h, out, "modelgate_"+strconv.Itoa(ex.answer.head.Status))
}

// responseBody translates the buffered body or one streamed chunk.
func (ex *exchange) responseBody(ctx context.Context, b *extprocv3.HttpBody) *extprocv3.ProcessingResponse {
	switch ex.answer.mode {
	case bodyEnvoyReply:
		ex.phase = phaseDone
		return ex.answer.envoyReplyBody(ex.req.dialect)
	case bodyPass:
		return bodyReply(nil, false, nil)
	case bodyDropped:
		return bodyReply(nil, true, nil)
	case bodyGather:
		// A large buffered answer gathered from a stream: nothing until
		// the last chunk, which carries the whole translation. The head
		// went out with the first reply, so a failure can only reset the
		// stream.
		body, done, err := ex.answer.gather(b.GetBody(), b.GetEndOfStream(), ex.s.cfg.MaxResponseBytes)
		if err != nil {
			ex.log.Error("provider answer over the gateway's limit", zap.Int64("limit", ex.s.cfg.MaxResponseBytes))
			return ex.fail(err)
		}
		if !done {
			return bodyReply(nil, true, nil)
		}
		out, err := ex.translateBody(ctx, body, true)
		if err != nil {
			return ex.fail(err)
		}
		return ex.finishBody(out, true, true, nil)
	}
	// In BUFFERED mode Envoy sends exactly one message; its end_of_stream
	// is false only when trailers follow, which we do not process.
	eos := b.GetEndOfStream() || ex.answer.mode == bodyTranslate
	if ex.answer.mode == bodyStream {
		ex.answer.at.lastChunk = ex.s.now()
	}
	out, err := ex.translateBody(ctx, b.GetBody(), eos)
	if err != nil {
		return ex.failBody(err)
	}
	if ex.answer.head.Stream && len(out) > 0 && ex.answer.at.firstByte.IsZero() {
		ex.answer.at.firstByte = ex.s.now()
	}
	var mut *headers
	if !ex.answer.head.Stream {
		if bytes.Equal(out, b.GetBody()) { // the answer as it came (OpenAI's, mostly): Envoy passes it on
			return ex.finishBody(nil, false, eos, nil)
		}
		mut = &headers{}
		mut.SetInt("content-length", int64(len(out)))
	}
	return ex.finishBody(out, true, eos, mut)
}

// translateBody runs the translator, notes what it reports it produced
// (finish reasons for the span; the text the client got, for an estimate
// of a stream, or of a JSON answer without usage), adds what the gateway
// adds (image URLs, stored responses), and captures the result.
func (ex *exchange) translateBody(ctx context.Context, body []byte, eos bool) ([]byte, error) {
	tout, err := ex.tr.ResponseBody(body, eos)
	if err != nil {
		return nil, err
	}
	// The report is read where it is needed: a stream's text (or a JSON
	// answer's without usage) for an estimate, the span's finish
	// reasons, the text a capture hides.
	var texts []translate.Text
	countText := ex.answer.head.Stream || providerUsage(ex.tr).CompletionTokens == 0
	g := ex.answer.body.guard
	if countText || ex.span.span != nil || ex.capture.hidesText() || g != nil {
		rep := ex.tr.Output()
		if ex.span.span != nil {
			ex.span.noteFinishReasons(rep.FinishReasons)
		}
		if countText {
			ex.answer.generated += rep.TextBytes()
		}
		texts = rep.Texts
		if g != nil { // what the rules let through, when they do
			if tout, texts, err = g.Next(ctx, tout, texts, eos); err != nil {
				var u *guard.Unavailable
				var r *guard.Refused
				switch {
				case errors.As(err, &u):
					return nil, errGuardUnavailable(u.Rule, err)
				case errors.As(err, &r):
					return nil, errAnswerFiltered(r.Rule)
				}
				return nil, err
			}
		}
	}
	out := tout
	var scrub func([]byte) []byte
	if ex.answer.head.Status >= 400 || ex.answer.head.Stream && bytes.Contains(out, []byte(`"error"`)) {
		scrub = func(b []byte) []byte { return ex.s.scrubCredentials(b, ex.route.target.APIKey) }
		out = scrub(out)
	}
	ac := answerContext{s: ex.s, account: ex.req.principal.AccountID, head: ex.answer.head, log: &ex.log, refused: g != nil && g.Blocked()}
	if out, err = ex.flow.answer(ctx, ac, out, eos); err != nil {
		return nil, err
	}
	ex.capture.translated(out, tout, texts, scrub)
	return out, nil
}

// finishBody replies with out in place of the body or chunk (replace), or
// with the body passed on as it came, and at the end settles the
// exchange.
func (ex *exchange) finishBody(out []byte, replace, eos bool, mut *headers) *extprocv3.ProcessingResponse {
	if replace && !eos && mut == nil {
		if ex.answer.body.chunk == nil {
			ex.answer.body.chunk = newChunkReply()
		}
		return ex.answer.body.chunk.with(out)
	}
	reply := bodyReply(out, replace, mut)
	if eos {
		ex.phase, ex.answer.completed = phaseDone, true
		reply.DynamicMetadata = ex.s.metadata(&ex.req, &ex.route, providerUsage(ex.tr))
	}
	return reply
}

// failBody ends an exchange whose answer could not be translated. A
// buffered answer still can become an error; a stream whose head went out
// gets one error event and ends.
func (ex *exchange) failBody(err error) *extprocv3.ProcessingResponse {
	var reqErr *api.RequestError
	if !errors.As(err, &reqErr) {
		ex.log.Error("translating response", zap.Error(err))
	}
	if !ex.answer.head.Stream {
		// A 200 with nothing the client can use, for a reason that is the
		// request's (every image removed by a safety filter), is the
		// client's error; anything else is the provider's or ours.
		return ex.fail(err)
	}
	apiErr := toAPIError(err)
	ex.answer.mode, ex.answer.status, ex.answer.failure = bodyDropped, apiErr.Status, apiErr
	return bodyReply(streamError(ex.req.dialect, ex.tr, apiErr), true, nil)
}

// streamError is the end of a client stream the gateway fails: the
// translator's own (a Responses stream's error event and response.failed),
// else the dialect's error event. A translator that panics making it (it
// may be what panicked) gives the dialect's.
func streamError(d *dialect, tr translate.Translator, apiErr *APIError) (out []byte) {
	plain := d.streamError(apiErr)
	f, ok := tr.(translate.StreamFailer)
	if !ok {
		return plain
	}
	defer func() {
		if recover() != nil {
			out = plain
		}
	}()
	if b := f.FailStream(apiErr.Message, cmp.Or(apiErr.Code, apiErr.Type)); b != nil {
		return b
	}
	return plain
}

// codeDetailsAttribute is the response attribute that tells Envoy's own
// replies from the upstream's: via_upstream for a response that came from
// the provider, the reply's details otherwise (such as
// upstream_per_try_timeout or no_healthy_upstream).
const codeDetailsAttribute = "response.code_details"

// localReplyDetails reads codeDetailsAttribute, when Envoy sent it: the
// details of one of Envoy's own replies, or false for a provider's
// response or when the attribute was not asked for.
func localReplyDetails(attrs map[string]*structpb.Struct) (string, bool) {
	v, ok := attrs[extProcAttributes].GetFields()[codeDetailsAttribute]
	if !ok {
		return "", false
	}
	d := v.GetStringValue()
	return d, d != "via_upstream"
}
