package admin

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"math"
	"net/http"
	"sync"
	"time"
)

// sessions are the signed-in dashboard browsers of this process. Only the
// SHA-256 of each cookie value is kept, so the map's contents cannot be
// replayed and lookups do not compare secrets byte by byte.
type sessions struct {
	ttl time.Duration
	// csrfKey signs CSRF tokens; it is random per process, as sessions are.
	csrfKey []byte

	mu      sync.Mutex
	expires map[[32]byte]time.Time
	// flashes hold a new key's secret from the POST that made it to the
	// one page that shows it, by session: taken once, or gone after
	// flashTTL.
	flashes map[[32]byte]flash
}

// flash is a secret waiting to be shown once.
type flash struct {
	keyID, secret string
	expires       time.Time
}

// flashTTL is how long a new key's secret waits for its page.
const flashTTL = 5 * time.Minute

// maxSessions bounds memory; only holders of the admin token can add one.
const maxSessions = 1000

func newSessions(ttl time.Duration) (*sessions, error) {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("reading random bytes: %w", err)
	}
	return &sessions{ttl: ttl, csrfKey: key, expires: make(map[[32]byte]time.Time), flashes: make(map[[32]byte]flash)}, nil
}

// randomValue is a fresh cookie value.
func randomValue() string {
	var b [32]byte
	rand.Read(b[:]) //nolint:errcheck // crypto/rand.Read never fails
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// start signs a browser in with a new cookie value: never the one it had,
// so a value planted before sign-in is worthless.
func (s *sessions) start(now time.Time) string {
	v := randomValue()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.expires) >= maxSessions {
		for h, exp := range s.expires {
			if !now.Before(exp) {
				delete(s.expires, h)
			}
		}
	}
	if len(s.expires) >= maxSessions {
		clear(s.expires) // sign everyone out rather than grow
	}
	s.expires[sha256.Sum256([]byte(v))] = now.Add(s.ttl)
	return v
}

// valid reports whether a cookie value is a live session.
func (s *sessions) valid(v string, now time.Time) bool {
	if v == "" {
		return false
	}
	h := sha256.Sum256([]byte(v))
	s.mu.Lock()
	defer s.mu.Unlock()
	exp, ok := s.expires[h]
	if ok && !now.Before(exp) {
		delete(s.expires, h)
		return false
	}
	return ok
}

// end signs a session out.
func (s *sessions) end(v string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.expires, sha256.Sum256([]byte(v)))
	delete(s.flashes, sha256.Sum256([]byte(v)))
}

// putFlash keeps a new key's secret for the session's next page of that
// key; a session has one at most.
func (s *sessions) putFlash(v, keyID, secret string, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for h, f := range s.flashes {
		if !now.Before(f.expires) {
			delete(s.flashes, h)
		}
	}
	s.flashes[sha256.Sum256([]byte(v))] = flash{keyID, secret, now.Add(flashTTL)}
}

// takeFlash returns the secret kept for the session and key, once.
func (s *sessions) takeFlash(v, keyID string, now time.Time) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := sha256.Sum256([]byte(v))
	f, ok := s.flashes[h]
	if !ok || f.keyID != keyID {
		return "", false
	}
	delete(s.flashes, h)
	return f.secret, now.Before(f.expires)
}

// csrfToken is the token forms of the session (or of the pre-sign-in
// cookie) must carry: an HMAC of the cookie value, which a cross-site page
// can neither read nor compute.
func (s *sessions) csrfToken(v string) string {
	mac := hmac.New(sha256.New, s.csrfKey)
	mac.Write([]byte("csrf\x00" + v))
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// csrfOK checks a form's token against the cookie value, in constant time.
func (s *sessions) csrfOK(v, token string) bool {
	return v != "" && hmac.Equal([]byte(token), []byte(s.csrfToken(v)))
}

// secure reports whether the session cookie must be Secure: over TLS, or
// when configured for a TLS-terminating proxy. Plain http://127.0.0.1 (as
// in `modelgate dev`) gets a cookie without it, or the browser would not
// send it back.
func (h *Handler) secure(r *http.Request) bool { return r.TLS != nil || h.cfg.SecureCookies }

// cookieName is the session cookie's name; with Secure it takes the
// __Host- prefix, which makes browsers refuse it from any other host or
// path and over plain HTTP.
func cookieName(secure bool) string {
	if secure {
		return "__Host-modelgate_admin"
	}
	return "modelgate_admin"
}

// cookie returns the request's session cookie value, or "".
func (h *Handler) cookie(r *http.Request) string {
	c, err := r.Cookie(cookieName(h.secure(r)))
	if err != nil {
		return ""
	}
	return c.Value
}

// setCookie sets the session cookie; maxAge < 0 deletes it and 0 makes it
// last until the browser closes.
func (h *Handler) setCookie(w http.ResponseWriter, r *http.Request, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{Name: cookieName(h.secure(r)), Value: value, Path: "/", MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: h.secure(r)})
}

// loginPage shows the sign-in form, first giving the browser a cookie for
// the form's CSRF token if it has none.
func (h *Handler) loginPage(w http.ResponseWriter, r *http.Request) {
	v := h.cookie(r)
	if h.sessions.valid(v, h.cfg.Now()) {
		http.Redirect(w, r, "/admin/", http.StatusSeeOther)
		return
	}
	if v == "" {
		v = randomValue()
		h.setCookie(w, r, v, 0)
	}
	h.renderPage(w, r, view{CSRF: h.sessions.csrfToken(v)}, http.StatusOK, "login", "Sign in", "")
}

// login checks the form's CSRF token, then the admin token, and starts a
// session under a new cookie value.
func (h *Handler) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	v := h.cookie(r)
	if !h.sessions.csrfOK(v, r.PostFormValue("csrf")) {
		h.renderError(w, r, view{}, errStaleForm)
		return
	}
	if token := r.PostFormValue("token"); !h.tokenOK(token) {
		status, msg := http.StatusUnauthorized, "That is not the admin token."
		if wait := h.wrongToken(r, token); wait > 0 {
			status, msg = http.StatusTooManyRequests, fmt.Sprintf("That is not the admin token, and too many wrong ones came from your address: "+
				"wrong tokens are refused for %d minutes (the right one is always accepted).", int(math.Ceil(wait.Minutes())))
		}
		h.renderPage(w, r, view{CSRF: h.sessions.csrfToken(v)}, status, "login", "Sign in", msg)
		return
	}
	ttl := h.cfg.SessionTTL
	h.setCookie(w, r, h.sessions.start(h.cfg.Now()), int(ttl/time.Second))
	http.Redirect(w, r, "/admin/", http.StatusSeeOther)
}

// logout ends the session (the page wrapper has checked its CSRF token).
func (h *Handler) logout(w http.ResponseWriter, r *http.Request, _ view) error {
	h.sessions.end(h.cookie(r))
	h.setCookie(w, r, "", -1)
	http.Redirect(w, r, "/admin/login", http.StatusSeeOther)
	return nil
}
