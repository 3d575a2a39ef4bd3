package sqlite

import (
	"context"
	"time"
)

// SaveImage keeps a generated image until expires, for the signed URL the
// gateway hands out in its place, and drops expired ones.
func (s *Store) SaveImage(ctx context.Context, accountID, id, contentType string, data []byte, expires time.Time) error {
	now := s.now()
	if _, err := s.db.ExecContext(ctx, `INSERT INTO images (id, account_id, content_type, data, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?)`,
		id, accountID, contentType, data, now.UnixMilli(), expires.UnixMilli()); err != nil {
		return err
	}
	_, err := s.db.ExecContext(ctx, `DELETE FROM images WHERE expires_at <= ?`, now.UnixMilli())
	return err
}

// Image returns a kept image; unknown and expired ids are authz.ErrNotFound.
// It is not account-scoped: whoever holds a validly signed URL may fetch it.
func (s *Store) Image(ctx context.Context, id string, now time.Time) (contentType string, data []byte, err error) {
	err = s.db.QueryRowContext(ctx, `SELECT content_type, data FROM images WHERE id = ? AND expires_at > ?`,
		id, now.UnixMilli()).Scan(&contentType, &data)
	if err != nil {
		return "", nil, notFound(err)
	}
	return contentType, data, nil
}
