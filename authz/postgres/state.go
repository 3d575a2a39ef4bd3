package postgres

import (
	"context"
	"encoding/json"
	"time"

	"github.com/jackc/pgx/v5"

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
	var resp []byte // NULL without a Response object
	var inputs *int
	if r.Response != nil {
		resp, inputs = r.Response, &r.Inputs
	}
	now := ms(s.now())
	if _, err := s.pool.Exec(ctx, `INSERT INTO responses (id, account_id, items, response, inputs, created_at, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`,
		id, accountID, b, resp, inputs, now, ms(expires)); err != nil {
		return exists(err, "response", id)
	}
	_, err = s.pool.Exec(ctx, `DELETE FROM responses WHERE expires_at <= $1`, now)
	return err
}

// Conversation implements state.Responses.
func (s *Store) Conversation(ctx context.Context, accountID, id string, now time.Time) ([]json.RawMessage, error) {
	var b []byte
	err := s.row(ctx, func(row pgx.Row) error { return row.Scan(&b) },
		`SELECT items FROM responses WHERE id = $1 AND account_id = $2 AND expires_at > $3`, id, accountID, ms(now))
	if err != nil {
		return nil, err
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
	var inputs *int32
	err := s.row(ctx, func(row pgx.Row) error { return row.Scan(&items, &resp, &inputs) },
		`SELECT items, response, inputs FROM responses WHERE id = $1 AND account_id = $2 AND expires_at > $3`, id, accountID, ms(now))
	if err != nil {
		return state.Response{}, err
	}
	var r state.Response
	if resp != nil {
		r.Response = resp
	}
	if inputs != nil {
		r.Inputs = int(*inputs)
	}
	if err := json.Unmarshal(items, &r.Items); err != nil {
		return state.Response{}, err
	}
	return r, nil
}

// DeleteResponse implements state.Responses.
func (s *Store) DeleteResponse(ctx context.Context, accountID, id string, now time.Time) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM responses WHERE id = $1 AND account_id = $2 AND expires_at > $3`, id, accountID, ms(now))
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return authz.ErrNotFound
	}
	return nil
}

// ResponseOutputs implements state.Responses: one query, the ids passed
// as one text[], each a lookup by the primary key.
func (s *Store) ResponseOutputs(ctx context.Context, accountID string, ids []string, now time.Time) (map[string][]json.RawMessage, error) {
	out := map[string][]json.RawMessage{}
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT id, items, inputs FROM responses WHERE id = ANY($1) AND account_id = $2 AND expires_at > $3`,
		ids, accountID, ms(now))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var items []byte
		var inputs *int32
		if err := rows.Scan(&id, &items, &inputs); err != nil {
			return nil, err
		}
		n := 0
		if inputs != nil {
			n = int(*inputs)
		}
		if out[id], err = storesql.Output(items, n); err != nil {
			return nil, err
		}
	}
	return out, rows.Err()
}

// SaveImage implements state.Images.
func (s *Store) SaveImage(ctx context.Context, accountID, id, contentType string, data []byte, expires time.Time) error {
	now := ms(s.now())
	if _, err := s.pool.Exec(ctx, `INSERT INTO images (id, account_id, content_type, data, created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6)`,
		id, accountID, contentType, data, now, ms(expires)); err != nil {
		return exists(err, "image", id)
	}
	_, err := s.pool.Exec(ctx, `DELETE FROM images WHERE expires_at <= $1`, now)
	return err
}

// Image implements state.Images.
func (s *Store) Image(ctx context.Context, id string, now time.Time) (contentType string, data []byte, err error) {
	err = s.row(ctx, func(row pgx.Row) error { return row.Scan(&contentType, &data) },
		`SELECT content_type, data FROM images WHERE id = $1 AND expires_at > $2`, id, ms(now))
	if err != nil {
		return "", nil, err
	}
	return contentType, data, nil
}

// The store implements every storage interface of authz (authz.Store
// embeds them all).
var _ authz.Store = (*Store)(nil)
