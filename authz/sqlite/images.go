package sqlite

import (
	"context"
	"time"
)

// SaveImage implements state.Images.
func (s *Store) SaveImage(ctx context.Context, accountID, id, contentType string, data []byte, expires time.Time) error {
	now := s.now()
	if _, err := s.db.ExecContext(ctx, `INSERT INTO images (id, account_id, content_type, data, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?)`,
		id, accountID, contentType, data, now.UnixMilli(), expires.UnixMilli()); err != nil {
		return exists(err, "image", id)
	}
	_, err := s.db.ExecContext(ctx, `DELETE FROM images WHERE expires_at <= ?`, now.UnixMilli())
	return err
}

// Image implements state.Images.
func (s *Store) Image(ctx context.Context, id string, now time.Time) (contentType string, data []byte, err error) {
	err = s.db.QueryRowContext(ctx, `SELECT content_type, data FROM images WHERE id = ? AND expires_at > ?`,
		id, now.UnixMilli()).Scan(&contentType, &data)
	if err != nil {
		return "", nil, notFound(err)
	}
	return contentType, data, nil
}
