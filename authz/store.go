package authz

import (
	"context"
	"time"

	"modelgate/authz/ledger"
	"modelgate/authz/pricing"
	"modelgate/authz/state"
)

// The storage interfaces, one a concern: those of authz here, the usage
// ledger's and the captures' in package ledger, the responses' and the
// images' in package state. Their methods are safe for concurrent use;
// lookups that find nothing return ErrNotFound. Times are kept to the
// millisecond. Consumers take the interfaces they use (or declare smaller
// ones of their own); Store is all of them, what a storage backend
// implements.

// Store persists everything authz keeps: groups, accounts and keys, the
// usage ledger and payload captures, run-time prices, the audit log, the
// response state of the Responses API and the images the gateway keeps.
// The SQLite and PostgreSQL stores implement it; it is what wiring opens
// and hands out in parts, and what the conformance suite runs against.
type Store interface {
	Accounts
	Groups
	Keys
	ledger.UsageStore
	ledger.CaptureStore
	Prices
	Audit
	state.Responses
	state.Images

	// Close releases the store.
	Close() error
}

// Accounts persists accounts, which own keys and are charged usage.
type Accounts interface {
	// CreateAccount creates an account; ErrExists if the name is taken.
	CreateAccount(ctx context.Context, name string) (Account, error)
	// AccountByID returns an account.
	AccountByID(ctx context.Context, id string) (Account, error)
	// AccountByName returns an account.
	AccountByName(ctx context.Context, name string) (Account, error)
	// ListAccounts returns every account, by name.
	ListAccounts(ctx context.Context) ([]Account, error)
	// UpdateAccount sets the name, group, models, guardrails, disabled
	// flag, limits and budget of the account with a.ID. ErrNotFound for an unknown account or
	// group, ErrExists if the name is taken.
	UpdateAccount(ctx context.Context, a Account) error
	// SetAccountDisabled disables or enables an account.
	SetAccountDisabled(ctx context.Context, id string, disabled bool) error
}

// Groups persists groups, which hold accounts.
type Groups interface {
	// CreateGroup stores a group; it assigns ID and CreatedAt when empty.
	// ErrExists if the name is taken.
	CreateGroup(ctx context.Context, g Group) (Group, error)
	// GroupByID returns a group.
	GroupByID(ctx context.Context, id string) (Group, error)
	// GroupByName returns a group.
	GroupByName(ctx context.Context, name string) (Group, error)
	// ListGroups returns every group, by name.
	ListGroups(ctx context.Context) ([]Group, error)
	// UpdateGroup sets the name, models, guardrails, limits and budget of
	// the group with g.ID.
	// ErrExists if the name is taken.
	UpdateGroup(ctx context.Context, g Group) error
}

// Keys persists API keys: their hashes, never their secrets (CreateKey,
// IssueKey and RegisterKey make one from a secret).
type Keys interface {
	// CreateKey stores a key; it assigns ID and CreatedAt when empty.
	// ErrExists if the hash is already stored; ErrNotFound for an unknown
	// account.
	CreateKey(ctx context.Context, k Key) (Key, error)
	// KeyByHash returns the key with that SHA-256, revoked or not.
	KeyByHash(ctx context.Context, hash [32]byte) (Key, error)
	// KeyByID returns a key.
	KeyByID(ctx context.Context, id string) (Key, error)
	// KeyByPrefix returns the key with that visible prefix.
	KeyByPrefix(ctx context.Context, prefix string) (Key, error)
	// ListKeys returns an account's keys, oldest first.
	ListKeys(ctx context.Context, accountID string) ([]Key, error)
	// UpdateKey sets the name, models, guardrails, disabled flag, expiry
	// and budget of the key with k.ID; its secret, account and revocation
	// stay.
	UpdateKey(ctx context.Context, k Key) error
	// SetKeyDisabled disables or enables a key.
	SetKeyDisabled(ctx context.Context, id string, disabled bool) error
	// RevokeKey revokes a key for good.
	RevokeKey(ctx context.Context, id string) error
	// TouchKey records that a key was used at at, unless a later use is
	// already recorded.
	TouchKey(ctx context.Context, id string, at time.Time) error
}

// Prices keeps the prices set at run time, over the config file's.
type Prices interface {
	// ListPrices returns the prices set at run time (through the admin),
	// by model and From; the config file's are not stored.
	ListPrices(ctx context.Context) ([]pricing.Price, error)
	// SetPrice stores a price, replacing the one of the same model and
	// From.
	SetPrice(ctx context.Context, p pricing.Price) error
	// DeletePrice removes the price of a model from a time; ErrNotFound
	// when there is none.
	DeletePrice(ctx context.Context, model string, from time.Time) error
}

// Audit is the log of admin changes.
type Audit interface {
	// AppendAudit records an admin change; the store numbers it.
	AppendAudit(ctx context.Context, e AuditEntry) error
	// ListAudit returns admin changes, newest first.
	ListAudit(ctx context.Context, q AuditQuery) ([]AuditEntry, error)
}
