package sqlite

import (
	"context"
	"encoding/json"
	"time"
)

// SaveResponse implements authz.Store.
func (s *Store) SaveResponse(ctx context.Context, accountID, id string, items []json.RawMessage, expires time.Time) error {
	b, err := json.Marshal(items)
	if err != nil {
		return err
	}
	now := s.now()
	if _, err := s.db.ExecContext(ctx, `INSERT INTO responses (id, account_id, items, created_at, expires_at) VALUES (?, ?, ?, ?, ?)`,
		id, accountID, b, now.UnixMilli(), expires.UnixMilli()); err != nil {
		return exists(err, "response", id)
	}
	_, err = s.db.ExecContext(ctx, `DELETE FROM responses WHERE expires_at <= ?`, now.UnixMilli())
	return err
}

// Conversation implements authz.Store.
func (s *Store) Conversation(ctx context.Context, accountID, id string, now time.Time) ([]json.RawMessage, error) {
	var b []byte
	err := s.db.QueryRowContext(ctx, `SELECT items FROM responses WHERE id = ? AND account_id = ? AND expires_at > ?`,
		id, accountID, now.UnixMilli()).Scan(&b)
	if err != nil {
		return nil, notFound(err)
	}
	var items []json.RawMessage
	if err := json.Unmarshal(b, &items); err != nil {
		return nil, err
	}
	return items, nil
}
