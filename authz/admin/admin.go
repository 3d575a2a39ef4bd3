package admin

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"errors"
	"html/template"
	"io/fs"
	"net/http"
	"strings"
	"time"

	"go.uber.org/zap"

	"modelgate/authz"
	"modelgate/authz/ledger"
	"modelgate/authz/pricing"
)

//go:embed templates/*.html
var templateFiles embed.FS

//go:embed static
var staticFiles embed.FS

// Config holds the Handler's knobs. Only TokenSHA256 is required.
type Config struct {
	// TokenSHA256 is the SHA-256 of the admin token.
	TokenSHA256 [32]byte
	// Invalidate is called after every change to groups, accounts or keys
	// and before the answer is written, so that this process's
	// Authenticator stops serving cached principals at once; nil calls
	// nothing.
	Invalidate func()
	// Models are the configured public model ids: forms offer them, and
	// allowed-model lists may hold no others. Empty accepts any id.
	Models []string
	// SessionTTL is how long a dashboard sign-in lasts; zero means 12h.
	SessionTTL time.Duration
	// SecureCookies marks the session cookie Secure on plain HTTP too, for
	// a dashboard behind a TLS-terminating proxy; requests that arrive over
	// TLS always get Secure cookies.
	SecureCookies bool
	// Currency is the unit of usage costs (the config's prices.currency);
	// empty means USD.
	Currency string
	// ConfigPrices are the config file's prices. Prices set through the
	// admin are stored, and replace those of the same model and From.
	ConfigPrices []pricing.Price
	// Spent reads what budgets have spent in the period holding at, and
	// when their periods end, for the pages: budgets[i] is subjects[i]'s
	// ("key:<id>", "account:<id>", "group:<id>"), all read at once. Nil
	// shows budgets without their spending.
	Spent func(ctx context.Context, at time.Time, subjects []string, budgets []authz.Budget) ([]pricing.Nanos, []time.Time, error)
	// PricesChanged is called after a price is set or deleted, before the
	// answer is written, so that this process's gateway prices requests
	// with it at once; nil calls nothing.
	PricesChanged func()
	// Logger logs errors the client is not told about; nil logs nothing.
	Logger *zap.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Store is what the admin API and the dashboard read and change: groups,
// accounts and keys, the usage ledger (reports and requests) with the
// captures of requests, the prices set at run time and the audit log of
// it all. Every authz.Store is one.
type Store interface {
	authz.Accounts
	authz.Groups
	authz.Keys
	ledger.UsageStore
	ledger.CaptureStore
	authz.Prices
	authz.Audit
}

// Handler serves the admin API and the dashboard. Mount it at /admin/.
type Handler struct {
	store    Store
	cfg      Config
	sessions *sessions
	throttle *throttle
	pages    map[string]*template.Template
	mux      *http.ServeMux
	cop      *http.CrossOriginProtection
}

// New returns a Handler over store.
func New(store Store, cfg Config) (*Handler, error) {
	if cfg.TokenSHA256 == ([32]byte{}) {
		return nil, errors.New("admin: the SHA-256 of the admin token is required")
	}
	if cfg.Invalidate == nil {
		cfg.Invalidate = func() {}
	}
	if cfg.PricesChanged == nil {
		cfg.PricesChanged = func() {}
	}
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = 12 * time.Hour
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Currency == "" {
		cfg.Currency = "USD"
	}
	sess, err := newSessions(cfg.SessionTTL)
	if err != nil {
		return nil, err
	}
	h := &Handler{store: store, cfg: cfg, sessions: sess, throttle: newThrottle(), mux: http.NewServeMux(), cop: http.NewCrossOriginProtection()}
	h.cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.renderError(w, r, view{}, &apiError{Status: http.StatusForbidden, Type: "permission_error",
			Message: "cross-origin requests are refused"})
	}))
	if h.pages, err = parsePages(h.funcs()); err != nil {
		return nil, err
	}
	h.routes()
	return h, nil
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

func (h *Handler) routes() {
	api := func(pattern string, fn apiFunc) { h.mux.Handle(pattern, h.api(fn)) }
	api("GET /admin/v1/groups", h.apiListGroups)
	api("POST /admin/v1/groups", h.apiCreateGroup)
	api("GET /admin/v1/groups/{id}", h.apiGroup)
	api("PATCH /admin/v1/groups/{id}", h.apiUpdateGroup)
	api("GET /admin/v1/accounts", h.apiListAccounts)
	api("POST /admin/v1/accounts", h.apiCreateAccount)
	api("GET /admin/v1/accounts/{id}", h.apiAccount)
	api("PATCH /admin/v1/accounts/{id}", h.apiUpdateAccount)
	api("GET /admin/v1/accounts/{id}/keys", h.apiListKeys)
	api("POST /admin/v1/accounts/{id}/keys", h.apiCreateKey)
	api("GET /admin/v1/keys/{id}", h.apiKey)
	api("PATCH /admin/v1/keys/{id}", h.apiUpdateKey)
	api("POST /admin/v1/keys/{id}/revoke", h.apiRevokeKey)
	api("POST /admin/v1/keys/{id}/rotate", h.apiRotateKey)
	api("GET /admin/v1/usage", h.apiUsage)
	api("GET /admin/v1/prices", h.apiPrices)
	api("PUT /admin/v1/prices", h.apiSetPrice)
	api("DELETE /admin/v1/prices", h.apiDeletePrice)
	api("GET /admin/v1/audit", h.apiAudit)
	api("GET /admin/v1/requests", h.apiRequests)
	api("GET /admin/v1/requests/{id}", h.apiRequest)
	api("/admin/v1/", h.apiNoRoute) // after the token check, so routes are not probed

	page := func(pattern string, fn pageFunc) { h.mux.Handle(pattern, h.page(fn)) }
	page("GET /admin/{$}", h.home)
	page("GET /admin/groups", h.groupsPage)
	page("POST /admin/groups", h.groupsCreate)
	page("GET /admin/groups/{id}", h.groupPage)
	page("POST /admin/groups/{id}", h.groupUpdate)
	page("GET /admin/accounts", h.accountsPage)
	page("POST /admin/accounts", h.accountsCreate)
	page("GET /admin/accounts/{id}", h.accountPage)
	page("POST /admin/accounts/{id}", h.accountUpdate)
	page("POST /admin/accounts/{id}/{action}", h.accountAction)
	page("POST /admin/accounts/{id}/keys", h.keyCreate)
	page("GET /admin/keys/{id}", h.keyPage)
	page("GET /admin/keys/{id}/created", h.keyCreatedPage)
	page("POST /admin/keys/{id}", h.keyUpdate)
	page("POST /admin/keys/{id}/{action}", h.keyAction)
	page("GET /admin/usage", h.usagePage)
	page("GET /admin/usage.csv", h.usageCSV)
	page("GET /admin/prices", h.pricesPage)
	page("POST /admin/prices", h.pricesSet)
	page("POST /admin/prices/delete", h.pricesDelete)
	page("GET /admin/audit", h.auditPageHTML)
	page("GET /admin/requests", h.requestsPage)
	page("GET /admin/requests/{id}", h.requestPage)
	page("POST /admin/logout", h.logout)
	h.mux.Handle("GET /admin/login", h.dashboard(http.HandlerFunc(h.loginPage)))
	h.mux.Handle("POST /admin/login", h.dashboard(http.HandlerFunc(h.login)))
	static, _ := fs.Sub(staticFiles, "static")
	h.mux.Handle("GET /admin/static/", h.dashboard(http.StripPrefix("/admin/static/", http.FileServerFS(static))))
	h.mux.Handle("/admin/", h.page(h.noPage))
}

// tokenOK reports whether a presented admin token is the configured one.
func (h *Handler) tokenOK(token string) bool {
	sum := sha256.Sum256([]byte(token))
	return subtle.ConstantTimeCompare(sum[:], h.cfg.TokenSHA256[:]) == 1
}

// bearer returns the token of an Authorization: Bearer header.
func bearer(r *http.Request) string {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(token)
}

// dashboardPolicy allows the pages nothing but their own stylesheet and
// script: the dashboard works offline and injected markup cannot load or
// run anything.
const dashboardPolicy = "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self'; connect-src 'self'; " +
	"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// dashboard sets the headers every dashboard response carries and refuses
// cross-origin POSTs (by Sec-Fetch-Site and Origin), beneath the CSRF
// tokens.
func (h *Handler) dashboard(next http.Handler) http.Handler {
	return h.cop.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", dashboardPolicy)
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("Referrer-Policy", "no-referrer")
		if !strings.HasPrefix(r.URL.Path, "/admin/static/") {
			hd.Set("Cache-Control", "no-store") // pages may show a secret
		}
		next.ServeHTTP(w, r)
	}))
}

var _ http.Handler = (*Handler)(nil)
