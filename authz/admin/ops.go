package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"modelgate/authz"
)

// The changes the API and the dashboard share. Each validates, writes to
// the store and invalidates the Authenticator's cache before returning, so
// that a client told "revoked" can no longer use the key here.

// maxNameLen bounds names of groups, accounts and keys.
const maxNameLen = 200

// cleanName trims a name and checks it is printable and not too long.
func cleanName(name string, required bool) (string, error) {
	name = strings.TrimSpace(name)
	switch {
	case name == "" && required:
		return "", badRequest("a name is required")
	case utf8.RuneCountInString(name) > maxNameLen: // as the forms' maxlength counts
		return "", badRequest("a name may have at most %d characters", maxNameLen)
	case strings.IndexFunc(name, func(r rune) bool { return !unicode.IsPrint(r) && r != ' ' }) >= 0:
		return "", badRequest("a name must be printable text")
	}
	return name, nil
}

// cleanModels trims and deduplicates a model list and checks each id
// against the configured models, when there are any.
func (h *Handler) cleanModels(models []string) ([]string, error) {
	var out []string
	for _, m := range models {
		m = strings.TrimSpace(m)
		switch {
		case m == "" || slices.Contains(out, m):
			continue
		case strings.ContainsAny(m, ", \t\r\n") || len(m) > maxNameLen:
			return nil, badRequest("%q is not a model id", m)
		case len(h.cfg.Models) > 0 && !slices.Contains(h.cfg.Models, m):
			return nil, badRequest("model %q is not configured", m)
		}
		out = append(out, m)
	}
	return out, nil
}

// cleanGuardrails checks the names of the guardrail rules a level adds
// (authz.CleanGuardrails), not that the config has them: the admin does
// not know the gateway's rules, and the gateway ignores (and logs) names
// it does not have.
func cleanGuardrails(names []string) ([]string, error) {
	names, err := authz.CleanGuardrails(names)
	if err != nil {
		return nil, badRequest("%v", err)
	}
	return names, nil
}

func checkLimits(l authz.Limits) error {
	for _, v := range []*int64{l.RequestsPerMinute, l.TokensPerMinute, l.TokensPerDay, l.ConcurrentRequests} {
		if v != nil && *v < 0 {
			return badRequest("limits must not be negative")
		}
	}
	return nil
}

func checkBudget(b *authz.Budget) error {
	if b == nil {
		return nil
	}
	if err := b.Validate(); err != nil {
		return badRequest("%v", err)
	}
	return nil
}

func (h *Handler) checkGroup(g *authz.Group) (err error) {
	if g.Name, err = cleanName(g.Name, true); err != nil {
		return err
	}
	if g.Models, err = h.cleanModels(g.Models); err != nil {
		return err
	}
	if g.Guardrails, err = cleanGuardrails(g.Guardrails); err != nil {
		return err
	}
	if err := checkBudget(g.Budget); err != nil {
		return err
	}
	return checkLimits(g.Limits)
}

func (h *Handler) checkAccount(ctx context.Context, a *authz.Account) (err error) {
	if a.Name, err = cleanName(a.Name, true); err != nil {
		return err
	}
	if a.Models, err = h.cleanModels(a.Models); err != nil {
		return err
	}
	if a.Guardrails, err = cleanGuardrails(a.Guardrails); err != nil {
		return err
	}
	if a.GroupID != "" {
		if _, err := h.store.GroupByID(ctx, a.GroupID); errors.Is(err, authz.ErrNotFound) {
			return badRequest("there is no group %q", a.GroupID)
		} else if err != nil {
			return err
		}
	}
	if err := checkBudget(a.Budget); err != nil {
		return err
	}
	return checkLimits(a.Limits)
}

func (h *Handler) createGroup(ctx context.Context, g authz.Group) (authz.Group, error) {
	if err := h.checkGroup(&g); err != nil {
		return authz.Group{}, err
	}
	g, err := h.store.CreateGroup(ctx, g)
	if err != nil {
		return authz.Group{}, fmt.Errorf("group %q: %w", g.Name, err)
	}
	h.audit(ctx, "group.create", g.ID, nil, groupOut(g))
	return g, nil
}

func (h *Handler) updateGroup(ctx context.Context, g authz.Group) error {
	if err := h.checkGroup(&g); err != nil {
		return err
	}
	before, err := h.store.GroupByID(ctx, g.ID)
	if err != nil {
		return fmt.Errorf("group %q: %w", g.ID, err)
	}
	defer h.cfg.Invalidate()
	if err := h.store.UpdateGroup(ctx, g); err != nil {
		return err
	}
	h.audit(ctx, "group.update", g.ID, groupOut(before), groupOut(g))
	return nil
}

// createAccount creates an account and then sets what CreateAccount does
// not take.
func (h *Handler) createAccount(ctx context.Context, a authz.Account) (authz.Account, error) {
	if err := h.checkAccount(ctx, &a); err != nil {
		return authz.Account{}, err
	}
	created, err := h.store.CreateAccount(ctx, a.Name)
	if err != nil {
		return authz.Account{}, fmt.Errorf("account %q: %w", a.Name, err)
	}
	a.ID, a.CreatedAt = created.ID, created.CreatedAt
	if a.GroupID != "" || len(a.Models) > 0 || len(a.Guardrails) > 0 || a.Disabled || a.Limits != (authz.Limits{}) || a.Budget != nil {
		if err := h.store.UpdateAccount(ctx, a); err != nil {
			h.audit(ctx, "account.create", a.ID, nil, accountOut(created))
			return created, fmt.Errorf("setting up account %s: %w", a.ID, err)
		}
	}
	h.audit(ctx, "account.create", a.ID, nil, accountOut(a))
	return a, nil
}

func (h *Handler) updateAccount(ctx context.Context, a authz.Account) error {
	if err := h.checkAccount(ctx, &a); err != nil {
		return err
	}
	before, err := h.store.AccountByID(ctx, a.ID)
	if err != nil {
		return fmt.Errorf("account %q: %w", a.ID, err)
	}
	defer h.cfg.Invalidate()
	if err := h.store.UpdateAccount(ctx, a); err != nil {
		return err
	}
	h.audit(ctx, "account.update", a.ID, accountOut(before), accountOut(a))
	return nil
}

// issueKey generates a key; the secret is returned only here.
func (h *Handler) issueKey(ctx context.Context, k authz.Key) (string, authz.Key, error) {
	var err error
	if k.Name, err = cleanName(k.Name, false); err != nil {
		return "", authz.Key{}, err
	}
	if k.Models, err = h.cleanModels(k.Models); err != nil {
		return "", authz.Key{}, err
	}
	if k.Guardrails, err = cleanGuardrails(k.Guardrails); err != nil {
		return "", authz.Key{}, err
	}
	if err := checkBudget(k.Budget); err != nil {
		return "", authz.Key{}, err
	}
	if _, err := h.store.AccountByID(ctx, k.AccountID); err != nil {
		return "", authz.Key{}, fmt.Errorf("account %q: %w", k.AccountID, err)
	}
	secret, k, err := authz.IssueKey(ctx, h.store, k)
	if err == nil {
		h.audit(ctx, "key.create", k.ID, nil, h.keyOut(k))
	}
	return secret, k, err
}

// updateKey saves a key's name, models, guardrails, disabled flag, expiry
// and budget.
func (h *Handler) updateKey(ctx context.Context, k authz.Key) error {
	if k.RevokedAt != nil {
		return errRevoked
	}
	var err error
	if k.Name, err = cleanName(k.Name, false); err != nil {
		return err
	}
	if k.Models, err = h.cleanModels(k.Models); err != nil {
		return err
	}
	if k.Guardrails, err = cleanGuardrails(k.Guardrails); err != nil {
		return err
	}
	if err := checkBudget(k.Budget); err != nil {
		return err
	}
	before, err := h.store.KeyByID(ctx, k.ID)
	if err != nil {
		return fmt.Errorf("key %q: %w", k.ID, err)
	}
	defer h.cfg.Invalidate()
	if err := h.store.UpdateKey(ctx, k); err != nil {
		return err
	}
	h.audit(ctx, "key.update", k.ID, h.keyOut(before), h.keyOut(k))
	return nil
}

// revokeKey revokes a key for good and returns it as revoked.
func (h *Handler) revokeKey(ctx context.Context, id string) (authz.Key, error) {
	before, err := h.store.KeyByID(ctx, id)
	if err != nil {
		return authz.Key{}, fmt.Errorf("key %q: %w", id, err)
	}
	err = h.store.RevokeKey(ctx, id)
	h.cfg.Invalidate()
	if err != nil {
		return authz.Key{}, fmt.Errorf("key %q: %w", id, err)
	}
	k, err := h.store.KeyByID(ctx, id)
	if err == nil && before.RevokedAt == nil {
		h.audit(ctx, "key.revoke", id, h.keyOut(before), h.keyOut(k))
	}
	return k, err
}

// MaxRotationGrace bounds how long a rotated key's old secret keeps
// working: a rotation is for a switch-over, and a secret that was rotated
// because it leaked must not live on for years.
const MaxRotationGrace = 30 * 24 * time.Hour

// rotateKey gives a key a successor with a new secret and the same
// settings, and lets the old secret work for grace more (never longer than
// it would have): clients switch without an outage. A key's budget starts
// afresh on its successor.
func (h *Handler) rotateKey(ctx context.Context, id string, grace time.Duration) (string, authz.Key, error) {
	if grace > MaxRotationGrace {
		return "", authz.Key{}, badRequest("grace: the old secret may keep working for at most %s (%d days), not %s",
			MaxRotationGrace, MaxRotationGrace/(24*time.Hour), grace)
	}
	old, err := h.store.KeyByID(ctx, id)
	if err != nil {
		return "", authz.Key{}, fmt.Errorf("key %q: %w", id, err)
	}
	now := h.cfg.Now()
	switch {
	case old.RevokedAt != nil:
		return "", authz.Key{}, errRevoked
	case old.ExpiresAt != nil && !now.Before(*old.ExpiresAt):
		return "", authz.Key{}, &apiError{Status: http.StatusConflict, Type: "conflict_error",
			Message: "the key has expired; create a new one"}
	}
	secret, next, err := h.issueKey(ctx, authz.Key{AccountID: old.AccountID, Name: old.Name, Models: old.Models,
		Guardrails: old.Guardrails, Disabled: old.Disabled, ExpiresAt: old.ExpiresAt, Budget: old.Budget})
	if err != nil {
		return "", authz.Key{}, err
	}
	until := now.Add(grace)
	rotated := old
	if old.ExpiresAt == nil || until.Before(*old.ExpiresAt) {
		rotated.ExpiresAt = &until
	}
	defer h.cfg.Invalidate()
	if err := h.store.UpdateKey(ctx, rotated); err != nil {
		return "", authz.Key{}, fmt.Errorf("key %q: ending the old secret: %w", id, err)
	}
	h.audit(ctx, "key.rotate", old.ID, h.keyOut(old), h.keyOut(rotated))
	return secret, next, nil
}
