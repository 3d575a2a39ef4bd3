package admin

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"go.uber.org/zap"

	"modelgate/authz"
)

// actorKey carries who makes a request's changes, for the audit log.
type actorKey struct{}

// Actors as the audit log names them.
const (
	actorAPI     = "admin API token"
	actorSession = "dashboard session "
)

func withActor(ctx context.Context, actor string) context.Context {
	return context.WithValue(ctx, actorKey{}, actor)
}

// sessionActor names a dashboard session by a digest of its cookie: the
// same for all its changes, and no use to anyone who reads the log.
func sessionActor(cookie string) string {
	sum := sha256.Sum256([]byte(cookie))
	return actorSession + hex.EncodeToString(sum[:4])
}

func actorOf(ctx context.Context) string {
	if a, ok := ctx.Value(actorKey{}).(string); ok {
		return a
	}
	return "unknown"
}

// audit records a change: the target's admin API JSON before and after
// (nil where it did not exist). A change is made before it is recorded,
// so a failure to record is logged, not returned.
func (h *Handler) audit(ctx context.Context, action, target string, before, after any) {
	e := authz.AuditEntry{At: h.cfg.Now().UTC(), Actor: actorOf(ctx), Action: action, Target: target,
		Before: jsonOrNil(before), After: jsonOrNil(after)}
	if err := h.store.AppendAudit(context.WithoutCancel(ctx), e); err != nil {
		h.cfg.Logger.Error("recording an admin change in the audit log", zap.String("action", action),
			zap.String("target", target), zap.Error(err))
	}
}

func jsonOrNil(v any) json.RawMessage {
	if v == nil {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil || string(b) == "null" { // a nil pointer: nothing there
		return nil
	}
	return b
}

// auditJSON is an audit entry in the admin API.
type auditJSON struct {
	ID     int64           `json:"id"`
	At     time.Time       `json:"at"`
	Actor  string          `json:"actor"`
	Action string          `json:"action"`
	Target string          `json:"target"`
	Before json.RawMessage `json:"before"`
	After  json.RawMessage `json:"after"`
}

// auditList is a page of the audit log, newest first; NextBefore, when
// set, is the cursor of the next page.
type auditList struct {
	Data       []auditJSON `json:"data"`
	NextBefore *int64      `json:"next_before"`
}

// auditPage reads a page of the audit log: before (a cursor), limit and
// target from the query.
func (h *Handler) auditPage(r *http.Request) (auditList, error) {
	q := r.URL.Query()
	var aq authz.AuditQuery
	var err error
	if s := q.Get("before"); s != "" {
		if aq.Before, err = strconv.ParseInt(s, 10, 64); err != nil || aq.Before <= 0 {
			return auditList{}, badRequest("before: %q is not a cursor from next_before", s)
		}
	}
	if aq.Limit, err = readLimit(q.Get("limit")); err != nil {
		return auditList{}, err
	}
	aq.Target = q.Get("target")
	es, err := h.store.ListAudit(r.Context(), aq)
	if err != nil {
		return auditList{}, err
	}
	out := auditList{Data: make([]auditJSON, 0, len(es))}
	for _, e := range es {
		out.Data = append(out.Data, auditJSON(e))
	}
	if len(es) == aq.Limit {
		out.NextBefore = &es[len(es)-1].ID
	}
	return out, nil
}

func (h *Handler) apiAudit(r *http.Request) (int, any, error) {
	l, err := h.auditPage(r)
	return http.StatusOK, l, err
}
