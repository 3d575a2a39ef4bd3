package authz

import (
	"context"
	"errors"
	"slices"
	"time"
)

// Sentinel errors. They know nothing of HTTP.
var (
	// ErrNotFound is returned by Store lookups that find nothing.
	ErrNotFound = errors.New("not found")
	// ErrExists is returned when creating something that already exists.
	ErrExists = errors.New("already exists")
	// ErrUnauthenticated means the presented key is unknown, malformed or
	// revoked.
	ErrUnauthenticated = errors.New("unauthenticated")
	// ErrDisabled means the key or its account is disabled.
	ErrDisabled = errors.New("key or account disabled")
)

// Account owns keys and is what usage is charged to.
type Account struct {
	ID        string
	Name      string
	Disabled  bool
	CreatedAt time.Time
}

// Key is a stored API key. It never holds the secret itself.
type Key struct {
	ID        string
	AccountID string
	Name      string
	// Prefix is the visible start of the secret, for display.
	Prefix string
	// Hash is the SHA-256 of the secret.
	Hash [32]byte
	// Models are the public model ids the key may use; empty means all.
	Models    []string
	Disabled  bool
	RevokedAt *time.Time
	CreatedAt time.Time
}

// Principal is who an authenticated request acts as.
type Principal struct {
	KeyID       string
	KeyPrefix   string
	AccountID   string
	AccountName string
	// Models are the model ids the key may use; empty means all.
	Models []string
}

// Allows reports whether the principal may use the model.
func (p *Principal) Allows(model string) bool {
	return len(p.Models) == 0 || slices.Contains(p.Models, model)
}

// UsageRecord is one request in the usage ledger.
type UsageRecord struct {
	RequestID        string
	KeyID            string
	AccountID        string
	Endpoint         string
	Model            string
	Backend          string
	Status           int
	PromptTokens     int64
	CompletionTokens int64
	TotalTokens      int64
	CachedTokens     int64
	ReasoningTokens  int64
	Duration         time.Duration
	At               time.Time
}

// UsageTotals sums usage records.
type UsageTotals struct {
	Requests         int64
	PromptTokens     int64
	CompletionTokens int64
	TotalTokens      int64
}

// Store persists accounts, keys and usage. Methods are safe for concurrent
// use; lookups that find nothing return ErrNotFound.
type Store interface {
	// CreateAccount creates an account; ErrExists if the name is taken.
	CreateAccount(ctx context.Context, name string) (Account, error)
	// AccountByID returns an account.
	AccountByID(ctx context.Context, id string) (Account, error)
	// AccountByName returns an account.
	AccountByName(ctx context.Context, name string) (Account, error)
	// SetAccountDisabled disables or enables an account.
	SetAccountDisabled(ctx context.Context, id string, disabled bool) error
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
	// SetKeyDisabled disables or enables a key.
	SetKeyDisabled(ctx context.Context, id string, disabled bool) error
	// RevokeKey revokes a key for good.
	RevokeKey(ctx context.Context, id string) error
	// AppendUsage appends a record to the usage ledger.
	AppendUsage(ctx context.Context, rec UsageRecord) error
	// UsageSince sums an account's usage records at or after since.
	UsageSince(ctx context.Context, accountID string, since time.Time) (UsageTotals, error)
	// Close releases the store.
	Close() error
}
