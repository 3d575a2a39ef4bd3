package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"time"

	"modelgate/authz"
	"modelgate/authz/internal/storesql"
	"modelgate/authz/state"
)

// SaveResponse implements state.Responses.
func (s *Store) SaveResponse(ctx context.Context, accountID, id string, r state.Response, expires time.Time) error {
	b, err := json.Marshal(r.Items)
	if err != nil {
		return err
	}
	var resp, inputs any // NULL without a Response object
	if r.Response != nil {
		resp, inputs = []byte(r.Response), r.Inputs
	}
	now := s.now()
	if _, err := s.db.ExecContext(ctx, `INSERT INTO responses (id, account_id, items, response, inputs, created_at, expires_at)
		VALUES (?, ?, ?, ?, ?, ?, ?)`,
		id, accountID, b, resp, inputs, now.UnixMilli(), expires.UnixMilli()); err != nil {
		return exists(err, "response", id)
	}
	_, err = s.db.ExecContext(ctx, `DELETE FROM responses WHERE expires_at <= ?`, now.UnixMilli())
	return err
}

// Conversation implements state.Responses.
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

// Response implements state.Responses.
func (s *Store) Response(ctx context.Context, accountID, id string, now time.Time) (state.Response, error) {
	var items, resp []byte
	var inputs sql.NullInt64
	err := s.db.QueryRowContext(ctx, `SELECT items, response, inputs FROM responses WHERE id = ? AND account_id = ? AND expires_at > ?`,
		id, accountID, now.UnixMilli()).Scan(&items, &resp, &inputs)
	if err != nil {
		return state.Response{}, notFound(err)
	}
	r := state.Response{Inputs: int(inputs.Int64)}
	if resp != nil {
		r.Response = resp
	}
	if err := json.Unmarshal(items, &r.Items); err != nil {
		return state.Response{}, err
	}
	return r, nil
}

// DeleteResponse implements state.Responses.
func (s *Store) DeleteResponse(ctx context.Context, accountID, id string, now time.Time) error {
	res, err := s.db.ExecContext(ctx, `DELETE FROM responses WHERE id = ? AND account_id = ? AND expires_at > ?`,
		id, accountID, now.UnixMilli())
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		if err == nil {
			err = authz.ErrNotFound
		}
		return err
	}
	return nil
}

// ResponseOutputs implements state.Responses: one query, the ids passed
// as one JSON array that json_each reads, so that no number of ids
// exceeds SQLite's limit on parameters. Each id is a lookup by the
// primary key.
func (s *Store) ResponseOutputs(ctx context.Context, accountID string, ids []string, now time.Time) (map[string][]json.RawMessage, error) {
	out := map[string][]json.RawMessage{}
	if len(ids) == 0 {
		return out, nil
	}
	list, err := json.Marshal(ids)
	if err != nil {
		return nil, err
	}
	rows, err := s.db.QueryContext(ctx, responseOutputs, string(list), accountID, now.UnixMilli())
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var items []byte
		var inputs sql.NullInt64
		if err := rows.Scan(&id, &items, &inputs); err != nil {
			return nil, err
		}
		if out[id], err = storesql.Output(items, int(inputs.Int64)); err != nil {
			return nil, err
		}
	}
	return out, rows.Err()
}

// responseOutputs selects the rows of ResponseOutputs.
const responseOutputs = `SELECT id, items, inputs FROM responses
	WHERE id IN (SELECT value FROM json_each(?)) AND account_id = ? AND expires_at > ?`
