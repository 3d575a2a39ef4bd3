package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"time"

	"go.uber.org/zap"

	"modelgate/authz"
	"modelgate/authz/admin"
	"modelgate/authz/pricing"
	"modelgate/extproc"
	"modelgate/extproc/config"
	"modelgate/ratelimit"
)

// minAdminToken is the shortest admin token accepted: the token guards
// every key, so it must not be guessable.
const minAdminToken = 32

// mountAdmin serves the admin API and dashboard under /admin/ on the admin
// mux when the admin token's variable is set. Only the token's SHA-256 is
// kept.
func mountAdmin(mux *http.ServeMux, cfg *config.Config, store admin.Store, auth *authz.Authenticator, prices *livePrices,
	spender ratelimit.Spender, getenv func(string) string, log *zap.Logger) error {
	token := getenv(cfg.Admin.TokenEnv)
	if token == "" {
		log.Info("admin API and dashboard off", zap.String("reason", cfg.Admin.TokenEnv+" is not set"))
		return nil
	}
	if len(token) < minAdminToken {
		return fmt.Errorf("admin.token_env: environment variable %s must hold at least %d characters", cfg.Admin.TokenEnv, minAdminToken)
	}
	models := make([]string, 0, len(cfg.Models))
	for _, m := range cfg.Models {
		models = append(models, m.ID)
	}
	h, err := admin.New(store, admin.Config{TokenSHA256: sha256.Sum256([]byte(token)), Invalidate: auth.Invalidate,
		Models: models, SecureCookies: cfg.Admin.SecureCookies, Currency: cfg.Prices.Currency, Logger: log.Named("admin"),
		ConfigPrices: prices.base, PricesChanged: func() { prices.reload(context.Background()) },
		Spent: func(ctx context.Context, at time.Time, subjects []string, budgets []authz.Budget) ([]pricing.Nanos, []time.Time, error) {
			if spender == nil {
				return nil, nil, errors.New("no budget counters")
			}
			rbs := make([]ratelimit.Budget, len(budgets))
			ends := make([]time.Time, len(budgets))
			for i, b := range budgets {
				rbs[i] = extproc.BudgetOf(subjects[i], b)
				_, ends[i] = rbs[i].Period(at)
			}
			n, err := spender.Spent(ctx, rbs, at)
			if err != nil {
				return nil, nil, err
			}
			out := make([]pricing.Nanos, len(n))
			for i, v := range n {
				out[i] = pricing.Nanos(v)
			}
			return out, ends, nil
		}})
	if err != nil {
		return err
	}
	mux.Handle("/admin/", h)
	return nil
}

// adminToken returns the admin token from the environment, or a new one
// that dev prints.
func (d *devStack) adminToken(cfg *config.Config) (string, error) {
	if token := d.e.getenv(cfg.Admin.TokenEnv); token != "" {
		d.adminTokenEnv = cfg.Admin.TokenEnv
		return token, nil
	}
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("reading random bytes: %w", err)
	}
	return "mg-admin-" + base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// announceAdmin prints where the dashboard is and how to sign in.
func (d *devStack) announceAdmin(a devAddrs) {
	fmt.Fprintf(d.e.stdout, "\n  dashboard: %s/admin/\n", a.Admin)
	if d.adminTokenEnv != "" {
		fmt.Fprintf(d.e.stdout, "  admin token: $%s\n", d.adminTokenEnv)
		return
	}
	fmt.Fprintf(d.e.stdout, "  admin token: %s   (shown once; sign in with it)\n", a.AdminToken)
}
