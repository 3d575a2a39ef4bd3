package state

import (
	"context"
	"encoding/json"
	"time"
)

// The storage interfaces of the state. Like the others of authz.Store,
// their methods are safe for concurrent use and times are kept to the
// millisecond.

// Responses keeps the responses of the Responses API the gateway produced,
// per account and until they expire.
type Responses interface {
	// SaveResponse stores a response of the account until expires, and
	// drops expired ones. authz.ErrExists if the id is taken.
	SaveResponse(ctx context.Context, accountID, id string, r Response, expires time.Time) error
	// Conversation returns the conversation of a stored response of the
	// account; unknown, expired and other accounts' ids are
	// authz.ErrNotFound alike.
	Conversation(ctx context.Context, accountID, id string, now time.Time) ([]json.RawMessage, error)
	// Response returns a stored response of the account, as Conversation
	// finds it.
	Response(ctx context.Context, accountID, id string, now time.Time) (Response, error)
	// DeleteResponse deletes a stored response of the account; unknown,
	// expired and other accounts' ids are authz.ErrNotFound.
	DeleteResponse(ctx context.Context, accountID, id string, now time.Time) error
	// ResponseOutputs returns the output items (the items of its
	// conversation after its input; all of them for a response kept
	// without its Response object) of each stored response of the account
	// among ids, by response id. Unknown, expired and other accounts' ids
	// are left out: none found is an empty map, not authz.ErrNotFound.
	// However many the ids, it makes one query: the item_references of a
	// request are looked up all at once.
	ResponseOutputs(ctx context.Context, accountID string, ids []string, now time.Time) (map[string][]json.RawMessage, error)
}

// Images keeps generated images until they expire, for the signed URLs
// handed out in their place.
type Images interface {
	// SaveImage keeps a generated image until expires, for the signed URL
	// handed out in its place, and drops expired ones. authz.ErrExists if
	// the id is taken.
	SaveImage(ctx context.Context, accountID, id, contentType string, data []byte, expires time.Time) error
	// Image returns a kept image; unknown and expired ids are
	// authz.ErrNotFound. It is not account-scoped: whoever holds a validly
	// signed URL may fetch it.
	Image(ctx context.Context, id string, now time.Time) (contentType string, data []byte, err error)
}

// Response is a response of the Responses API the gateway keeps, for
// previous_response_id and for retrieving it.
type Response struct {
	// Response is the Response object as the client got it. It is nil for
	// responses stored before the gateway kept it.
	Response json.RawMessage
	// Items is the conversation a continuation replays: every item up to
	// and including the response's output, in order.
	Items []json.RawMessage
	// Inputs is how many of Items came before the response's output: its
	// input, with the conversation it continued. Zero when Response is nil.
	Inputs int
}
