package extproc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"go.uber.org/zap"

	"modelgate/authz"
	"modelgate/authz/pricing"
	"modelgate/authz/state"
	"modelgate/translate"
	"modelgate/translate/api"
	"modelgate/translate/providers"
	"modelgate/translate/responses"
	"modelgate/translate/sse"
)

// responsesFlow is a Responses exchange's: it continues a stored
// conversation when asked to, and stores the response as soon as it
// completed. Providers that serve the Responses API themselves (OpenAI,
// Azure OpenAI) get the request passed through; every other provider
// gets it bridged onto its chat translator.
type responsesFlow struct {
	req    *responses.Request
	tr     conversationKeeper // the exchange's translator
	inputs int                // items of its conversation before its output
	object json.RawMessage    // the Response object the client got, once known
	events *sse.Decoder       // reads a stream's events until response.completed
	saved  bool               // the response is stored
}

func (f *responsesFlow) parse(ctx context.Context, st parser, body []byte) (*localAnswer, error) {
	req, err := responses.ParseRequest(body)
	if err != nil {
		return nil, err
	}
	history, err := continued(ctx, st, req, body)
	if err != nil {
		return nil, err
	}
	s, r := st.server(), st.request()
	req, left, err := req.Permitted(s.router.webSearch(r.model))
	if err != nil {
		return nil, err
	}
	if len(r.drop) > 0 { // no closure for a request that drops nothing
		if req, left, err = dropped(r, req, left, withoutIn(history), responsesBody); err != nil {
			return nil, err
		}
	}
	r.warning = left.Warning()
	if s.guarded() {
		// The conversation the provider gets: the stored one it
		// continues, then the request's.
		r.texts = func() []translate.RequestText { return append(responses.ItemTexts(history), responses.Texts(req)...) }
		r.maskTexts = func(m []string) []byte {
			next := inOrder(m)
			responses.MapItemTexts(history, next)
			responses.MapTexts(req, next)
			return mustJSON(req.Members)
		}
	}
	if window := s.router.models[r.model].ContextWindow; window > 0 && req.Truncation() == "auto" {
		history = responses.Truncate(history, req.Reserved(), window)
	}
	input, err := req.Items()
	if err != nil {
		return nil, &api.RequestError{Param: "input", Code: "invalid_type", Message: "Invalid 'input'."}
	}
	f.req, f.inputs = req, len(history)+len(input)
	r.stream, r.maxOutput, r.answerDialect = req.Stream, maxOutputTokens(req.Members), translate.Responses
	id, created := newID("resp_", 24), s.now().Unix()
	return nil, st.translator(func(p providers.Provider, t translate.Target) (translate.Translator, error) {
		tr, err := p.ResponsesTranslator(t, req, history, id, created)
		if err != nil {
			return nil, err
		}
		f.tr = tr
		return tr, nil
	})
}

// compactFlow is a compaction's (POST /v1/responses/compact): the
// conversation it compacts may continue a stored one; the compacted
// response is not stored, the client sends its output back as input.
type compactFlow struct{ passAnswer }

func (compactFlow) parse(ctx context.Context, st parser, body []byte) (*localAnswer, error) {
	req, err := responses.ParseRequest(body)
	if err != nil {
		return nil, err
	}
	if req.Stream {
		return nil, api.Invalid("stream", "Compaction does not stream; leave 'stream' out.")
	}
	history, err := continued(ctx, st, req, body)
	if err != nil {
		return nil, err
	}
	s, r := st.server(), st.request()
	req, left, err := req.Permitted(s.router.webSearch(r.model))
	if err != nil {
		return nil, err
	}
	if len(r.drop) > 0 { // no closure for a request that drops nothing
		if req, left, err = dropped(r, req, left, withoutIn(history), responsesBody); err != nil {
			return nil, err
		}
	}
	r.warning = left.Warning()
	r.maxOutput = maxOutputTokens(req.Members)
	id, created := newID("resp_", 24), s.now().Unix()
	return nil, st.translator(func(p providers.Provider, t translate.Target) (translate.Translator, error) {
		return p.CompactTranslator(t, req, history, id, created)
	})
}

func responsesBody(r *responses.Request) []byte { return mustJSON(r.Members) }

// withoutIn is Without for a request continuing history, which may offer
// tools too (additional_tools items).
func withoutIn(history []json.RawMessage) func(*responses.Request, []api.Capability) (*responses.Request, api.LeftOut, error) {
	return func(r *responses.Request, drop []api.Capability) (*responses.Request, api.LeftOut, error) {
		return r.Without(drop, history)
	}
}

// continued routes the model a Responses request names and reads the
// stored conversation it continues, and the stored items its
// item_references name: two store queries at most, however many the
// references (ParseRequest bounded them).
func continued(ctx context.Context, st parser, req *responses.Request, body []byte) ([]json.RawMessage, error) {
	s, p := st.server(), st.request().principal
	history, err := s.history(ctx, p, req.PreviousResponseID)
	if err != nil {
		return nil, err
	}
	if s.cfg.Responses != nil && p != nil {
		err = req.Dereference(history, func(ids []string) (map[string]json.RawMessage, error) {
			return s.storedItems(ctx, p, ids)
		})
		if err != nil {
			return nil, err
		}
	}
	// What the stored conversation holds is sent again, and asked of the
	// model as the request's own is.
	return history, st.pick(ctx, req.Model, st.request().ask(body, asks{responses: req, history: history}))
}

// storedItems finds the items ids name among the outputs of the
// principal's account's stored responses, in one query: an item the
// bridge made is named after its response (responses.ResponseOfItem), and
// is found in that response's output only. The items of unknown, expired
// and other accounts' responses are not found.
func (s *Server) storedItems(ctx context.Context, p *authz.Principal, ids []string) (map[string]json.RawMessage, error) {
	wanted := make(map[string]bool, len(ids))
	var resps []string // the responses to look up, each once
	asked := map[string]bool{}
	for _, id := range ids {
		r := responses.ResponseOfItem(id)
		if r == "" {
			continue
		}
		wanted[id] = true
		if !asked[r] {
			asked[r], resps = true, append(resps, r)
		}
	}
	if len(resps) == 0 {
		return nil, nil
	}
	outputs, err := s.cfg.Responses.ResponseOutputs(ctx, p.AccountID, resps, s.now())
	if err != nil {
		return nil, err
	}
	found := map[string]json.RawMessage{}
	for resp, items := range outputs {
		for _, it := range items {
			var has struct{ ID string }
			if json.Unmarshal(it, &has) != nil || !wanted[has.ID] || responses.ResponseOfItem(has.ID) != resp {
				continue
			}
			if _, dup := found[has.ID]; !dup {
				found[has.ID] = it
			}
		}
	}
	return found, nil
}

// conversationKeeper is a Responses translator: it knows the response's id
// and the conversation a continuation of it replays.
type conversationKeeper interface {
	ID() string
	Conversation() []json.RawMessage
}

// history is the conversation a Responses request continues.
func (s *Server) history(ctx context.Context, p *authz.Principal, previous string) ([]json.RawMessage, error) {
	if previous == "" {
		return nil, nil
	}
	if s.cfg.Responses == nil {
		return nil, errPreviousResponseNotFound(previous)
	}
	if p == nil { // an upstream stream without its request's context
		return nil, errInternal(errNoAccount)
	}
	items, err := s.cfg.Responses.Conversation(ctx, p.AccountID, previous, s.now())
	if errors.Is(err, authz.ErrNotFound) {
		return nil, errPreviousResponseNotFound(previous)
	}
	return items, err
}

func errPreviousResponseNotFound(id string) *APIError {
	return &APIError{Status: http.StatusNotFound, Type: typeInvalidRequest, Param: "previous_response_id", Code: "previous_response_not_found",
		Message: fmt.Sprintf("Previous response with id '%s' not found.", quoted(id))}
}

func (f *responsesFlow) answer(ctx context.Context, ac answerContext, out []byte, eos bool) ([]byte, error) {
	if !f.saved {
		f.save(ctx, ac, out, eos)
	}
	return out, nil
}

func (*responsesFlow) price(u pricing.Usage, _ bool) pricing.Usage { return u }

// save stores the response as soon as it completed, before the reply
// that tells the client so: a client may continue it right away. It
// stores nothing when the client said store: false. out is the
// translation of the latest body or chunk, which holds the Response object
// the client gets: the whole body, or in a stream the response.completed
// event's response.
func (f *responsesFlow) save(ctx context.Context, ac answerContext, out []byte, eos bool) {
	if ac.s.cfg.Responses == nil || !f.req.Store || ac.refused {
		// A response a guardrail blocked is not kept: its conversation
		// holds what the rule blocked.
		f.saved = true
		return
	}
	if ac.head.Stream {
		f.watchCompleted(out)
	} else {
		f.object = out
	}
	items := f.tr.Conversation()
	if items == nil || f.object == nil && !eos { // a stream's response.completed is still to come
		return
	}
	f.saved = true
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ac.s.cfg.UsageTimeout)
	defer cancel()
	id := f.tr.ID()
	r := state.Response{Response: f.object, Items: responses.WithItemIDs(items, f.inputs, func(prefix string) string { return newID(prefix, 24) }), Inputs: f.inputs}
	if err := ac.s.cfg.Responses.SaveResponse(ctx, ac.account, id, r, ac.s.now().Add(ac.s.cfg.ResponseRetention)); err != nil {
		ac.log.Error("storing response", zap.String("response_id", id), zap.Error(err))
	}
}

// watchCompleted reads the client's stream for the response.completed
// event and keeps its response.
func (f *responsesFlow) watchCompleted(out []byte) {
	if f.object != nil || len(out) == 0 {
		return
	}
	if f.events == nil {
		f.events = &sse.Decoder{}
	}
	// The decoder may keep the chunk; the translator may reuse it.
	for _, ev := range f.events.Feed(bytes.Clone(out)) {
		if ev.Type != "" && ev.Type != "response.completed" {
			continue
		}
		var done struct {
			Type     string          `json:"type"`
			Response json.RawMessage `json:"response"`
		}
		if json.Unmarshal(ev.Data, &done) == nil && done.Type == "response.completed" && len(done.Response) > 0 {
			f.object, f.events = done.Response, nil
			return
		}
	}
}

// errNoAccount: a continuation in an attempt whose context did not arrive.
var errNoAccount = errors.New("the attempt has no account for previous_response_id: the upstream ext_proc filter must forward the metadata namespace")
