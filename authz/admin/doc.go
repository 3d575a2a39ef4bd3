// Package admin serves the admin API (JSON under /admin/v1/) and the web
// dashboard (HTML under /admin/) for groups, accounts, API keys and usage,
// over a Store: the parts of an authz.Store they use.
//
// Both are guarded by one admin token, of which only the SHA-256 is kept
// and compared in constant time. The API takes it as a bearer token on
// every request and reads no cookies, so a browser cannot be tricked into
// calling it. The dashboard trades it at sign-in for a session: a random
// cookie value (HttpOnly, SameSite=Strict, Secure over TLS) whose SHA-256
// is kept in memory, so a restart signs everyone out and each replica has
// its own sessions. Every POST must carry the CSRF token of its session, an
// HMAC of the cookie value under a per-process key; the sign-in form is
// tied the same way to a cookie set when it is shown. Pages are rendered
// with html/template, embedded with their stylesheet and script, and served
// under a Content-Security-Policy that allows nothing from elsewhere.
//
// Every change to groups, accounts or keys calls Config.Invalidate before
// the answer is written, so the local Authenticator sees it at once; other
// replicas see it within their principal cache TTL.
package admin
