package extproc

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"go.uber.org/zap"

	"modelgate/authz"
	"modelgate/translate/providers"
	"modelgate/translate/responses"
)

// ResponseStore keeps the responses the gateway produced, so that
// previous_response_id works for every provider. It must be safe for
// concurrent use.
type ResponseStore interface {
	// SaveResponse stores a response's conversation (every item up to and
	// including its output) for the account until expires.
	SaveResponse(ctx context.Context, accountID, id string, items []json.RawMessage, expires time.Time) error
	// Conversation returns a stored conversation. Unknown and expired ids
	// and ids of another account give authz.ErrNotFound.
	Conversation(ctx context.Context, accountID, id string, now time.Time) ([]json.RawMessage, error)
}

// translateResponses sets up a Responses exchange, continuing a stored
// conversation when asked to. Providers that serve the Responses API
// themselves (OpenAI, Azure OpenAI) get the request passed through; every
// other provider gets it bridged onto its chat translator.
func (ex *exchange) translateResponses(ctx context.Context, body []byte) error {
	req, err := responses.ParseRequest(body)
	if err != nil {
		return err
	}
	if err := ex.pick(ctx, req.Model); err != nil {
		return err
	}
	history, err := ex.history(ctx, req.PreviousResponseID)
	if err != nil {
		return err
	}
	if window := ex.s.router.models[req.Model].ContextWindow; window > 0 && req.Truncation() == "auto" {
		history = responses.Truncate(history, req.Reserved(), window)
	}
	ex.respReq = req
	ex.stream, ex.maxOutput = req.Stream, maxOutputTokens(req.Members)
	id := newID("resp_", 24)
	var tr providers.ResponsesTranslator
	if native := ex.provider.Responses; native != nil {
		tr = native(ex.target, req, history, id)
	} else {
		chatReq, err := responses.ToChat(req, history)
		if err != nil {
			return err
		}
		tr = responses.NewTranslator(ex.provider.Chat(ex.target, chatReq), req, history, id, ex.s.now().Unix())
	}
	ex.tr, ex.responses = tr, tr
	return nil
}

// conversationKeeper is a Responses translator: it knows the response's id
// and the conversation a continuation of it replays.
type conversationKeeper interface {
	ID() string
	Conversation() []json.RawMessage
}

func (ex *exchange) history(ctx context.Context, previous string) ([]json.RawMessage, error) {
	if previous == "" {
		return nil, nil
	}
	if ex.s.cfg.Responses == nil {
		return nil, errPreviousResponseNotFound(previous)
	}
	items, err := ex.s.cfg.Responses.Conversation(ctx, ex.principal.AccountID, previous, ex.s.now())
	if errors.Is(err, authz.ErrNotFound) {
		return nil, errPreviousResponseNotFound(previous)
	}
	return items, err
}

// newID is a random id: prefix and n random bytes in hex.
func newID(prefix string, n int) string {
	b := make([]byte, n)
	rand.Read(b) //nolint:errcheck // crypto/rand.Read never fails
	return prefix + hex.EncodeToString(b)
}

func errPreviousResponseNotFound(id string) *APIError {
	return &APIError{Status: http.StatusNotFound, Type: typeInvalidRequest, Param: "previous_response_id", Code: "previous_response_not_found",
		Message: fmt.Sprintf("Previous response with id '%s' not found.", quoted(id))}
}

// saveResponse stores the response as soon as it completed, before the
// reply that tells the client so: a client may continue it right away. It
// stores nothing when the client said store: false.
func (ex *exchange) saveResponse(ctx context.Context) {
	if ex.s.cfg.Responses == nil || !ex.respReq.Store {
		ex.saved = true
		return
	}
	items := ex.responses.Conversation()
	if items == nil {
		return
	}
	ex.saved = true
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ex.s.cfg.UsageTimeout)
	defer cancel()
	id := ex.responses.ID()
	if err := ex.s.cfg.Responses.SaveResponse(ctx, ex.principal.AccountID, id, items, ex.s.now().Add(ex.s.cfg.ResponseRetention)); err != nil {
		ex.log.Error("storing response", zap.String("response_id", id), zap.Error(err))
	}
}
