// Package state is what the gateway keeps for clients between their
// requests, on their behalf rather than for accounting: the responses of
// the Responses API (Response), which previous_response_id continues and
// clients retrieve and delete, and the images it generated, which the
// signed URLs handed out in their place fetch. Both expire.
//
// Responses and Images are its storage interfaces, which every authz.Store
// implements; lookups that find nothing return authz.ErrNotFound, and
// saving under a taken id authz.ErrExists. The package imports nothing of
// authz, so that authz.Store can embed its interfaces.
package state
