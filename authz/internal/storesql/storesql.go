// Package storesql holds what the SQL stores (authz/sqlite and
// authz/postgres) share: ids, the usage aggregate and the usage report
// query, apart from each dialect's placeholders and time values.
package storesql

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"modelgate/authz"
	"modelgate/authz/ledger"
	"modelgate/authz/pricing"
)

// NewID returns a random id of a kind, such as key_0123456789abcdef.
func NewID(kind string) string {
	var b [8]byte
	rand.Read(b[:]) //nolint:errcheck // crypto/rand.Read never fails
	return kind + "_" + hex.EncodeToString(b[:])
}

// UsageSums are the ledger.UsageTotals columns of an aggregate over usage,
// in the order of TotalsDest: a count of rows, or a Sum of a column, as
// two.
var UsageSums = strings.Join([]string{`COUNT(*)`, Sum(`prompt_tokens`), Sum(`completion_tokens`), Sum(`total_tokens`),
	Sum(`cached_tokens`), Sum(`reasoning_tokens`), Sum(`cost_nanos`), `COUNT(*) - COUNT(cost_nanos)`, Sum(`audio_ms`),
	Sum(`images`), `COALESCE(SUM(CASE WHEN status IN (401, 403, 429) THEN 1 ELSE 0 END), 0)`,
	`COALESCE(SUM(CASE WHEN status IN (401, 403, 429) OR status BETWEEN 200 AND 399 THEN 0 ELSE 1 END), 0)`,
	Sum(`cache_write_tokens`), Sum(`cache_write_1h_tokens`), Sum(`web_search_requests`)}, ", ")

// TotalsDest are the Scan destinations of UsageSums in t.
func TotalsDest(t *ledger.UsageTotals) []any {
	dest := []any{&t.Requests}
	dest = append(dest, SumDest(&t.PromptTokens, 1)...)
	dest = append(dest, SumDest(&t.CompletionTokens, 1)...)
	dest = append(dest, SumDest(&t.TotalTokens, 1)...)
	dest = append(dest, SumDest(&t.CachedTokens, 1)...)
	dest = append(dest, SumDest(&t.ReasoningTokens, 1)...)
	dest = append(dest, SumDest((*int64)(&t.Cost), 1)...)
	dest = append(dest, &t.UnknownCost)
	dest = append(dest, SumDest((*int64)(&t.Audio), int64(time.Millisecond))...)
	dest = append(dest, SumDest(&t.Images, 1)...)
	dest = append(dest, &t.Refused, &t.Failed)
	dest = append(dest, SumDest(&t.CacheWriteTokens, 1)...)
	dest = append(dest, SumDest(&t.CacheWrite1hTokens, 1)...)
	return append(dest, SumDest(&t.WebSearchRequests, 1)...)
}

// Sum is the sum of an integer column over the selected rows (0 for
// none) as two columns, for SumDest: the sums of its high 32 bits, signed,
// and of its low 32 bits. SQL's SUM of the column itself fails past 2^63
// (SQLite's with "integer overflow", PostgreSQL's numeric does not scan
// into an int64), which a ledger reaches with records of counts no
// provider could mean; the sums of the halves cannot overflow below 2^31
// rows, and SumDest adds them back exactly, saturating at the int64
// bounds. >> is an arithmetic shift in both SQLite and PostgreSQL.
func Sum(col string) string {
	return `COALESCE(SUM(` + col + ` >> 32), 0), COALESCE(SUM(` + col + ` & 4294967295), 0)`
}

// SumDest are the two Scan destinations of a Sum into *n, times unit
// (time.Millisecond for milliseconds into a Duration), saturating.
func SumDest(n *int64, unit int64) []any {
	s := &split{n: n, unit: unit}
	return []any{half{s, true}, half{s, false}}
}

// split receives the halves of a Sum and sets *n as each arrives, so
// that it needs no step after Scan, in whichever order Scan takes them.
type split struct {
	n        *int64
	unit     int64
	high, lo int64
}

type half struct {
	s    *split
	high bool
}

func (h half) Scan(v any) error {
	n, err := scanInt(v)
	if err != nil {
		return fmt.Errorf("a sum: %w", err)
	}
	if h.high {
		h.s.high = n
	} else {
		h.s.lo = n
	}
	*h.s.n = times(join(h.s.high, h.s.lo), h.s.unit)
	return nil
}

// join is high·2^32 + lo, saturated to the int64 bounds.
func join(high, lo int64) int64 {
	q, r := lo>>32, lo&0xffffffff // lo = q·2^32 + r, 0 ≤ r < 2^32
	switch {
	case q > 0 && high > math.MaxInt64-q:
		return math.MaxInt64
	case q < 0 && high < math.MinInt64-q:
		return math.MinInt64
	}
	switch h := high + q; {
	case h > math.MaxInt64>>32:
		return math.MaxInt64
	case h < math.MinInt64>>32:
		return math.MinInt64
	default:
		return h<<32 | r // h·2^32 + r: fits
	}
}

// times is n·unit (unit > 0), saturated to the int64 bounds.
func times(n, unit int64) int64 {
	switch {
	case n > math.MaxInt64/unit:
		return math.MaxInt64
	case n < math.MinInt64/unit:
		return math.MinInt64
	}
	return n * unit
}

// scanInt reads an integer column: an int64, or the text PostgreSQL's
// SUM of bigints (numeric) arrives as.
func scanInt(v any) (int64, error) {
	var text string
	switch v := v.(type) {
	case int64:
		return v, nil
	case string:
		text = v
	case []byte:
		text = string(v)
	default:
		return 0, fmt.Errorf("unexpected %T", v)
	}
	return strconv.ParseInt(text, 10, 64)
}

// millis scans a number of milliseconds into a Duration, saturating.
type millis struct{ d *time.Duration }

func (m millis) Scan(v any) error {
	n, err := scanInt(v)
	if err != nil {
		return fmt.Errorf("milliseconds: %w", err)
	}
	*m.d = time.Duration(times(n, int64(time.Millisecond)))
	return nil
}

// Dialect is what the usage queries need of a database.
type Dialect struct {
	// Day is the expression of a row's day, and NoDay the constant
	// selected in its place when the report is not grouped by day.
	Day, NoDay string
	// Param is the placeholder of the nth argument, from 1.
	Param func(n int) string
	// Time is a time as an argument.
	Time func(time.Time) any
	// Guard is the condition that a row's guardrails column (GuardArg)
	// holds an outcome whose result is the argument, its only ?.
	Guard string
}

// UsageReport returns the query and arguments of a usage report. It
// selects constants for the columns not grouped by, so that every row
// scans the same way: day, account, key, model, then UsageSums.
func (d Dialect) UsageReport(q ledger.UsageQuery) (string, []any) {
	var sel, group []string
	for _, c := range []struct {
		by        ledger.UsageGrouping
		expr, not string
	}{
		{ledger.ByDay, d.Day, d.NoDay},
		{ledger.ByAccount, `account_id`, `''`},
		{ledger.ByKey, `key_id`, `''`},
		{ledger.ByModel, `model`, `''`},
	} {
		if q.By&c.by == 0 {
			sel = append(sel, c.not)
			continue
		}
		sel = append(sel, c.expr)
		group = append(group, c.expr)
	}
	where := []string{"attempt = 0"} // failed attempts are not requests
	var args []any
	for _, f := range []struct {
		col string
		set bool
		arg any
	}{
		{`at >=`, true, d.Time(q.From)},
		{`at <`, !q.To.IsZero(), d.Time(q.To)},
		{`account_id =`, q.AccountID != "", q.AccountID},
		{`key_id =`, q.KeyID != "", q.KeyID},
		{`model =`, q.Model != "", q.Model},
	} {
		if f.set {
			args = append(args, f.arg)
			where = append(where, f.col+` `+d.Param(len(args)))
		}
	}
	query := `SELECT ` + strings.Join(sel, ", ") + `, ` + UsageSums + ` FROM usage WHERE ` + strings.Join(where, " AND ")
	if len(group) == 0 {
		return query + ` HAVING COUNT(*) > 0`, args // no empty row for no records
	}
	cols := strings.Join(group, ", ")
	return query + ` GROUP BY ` + cols + ` ORDER BY ` + cols, args
}

// BudgetArg is the value of a budget column: its JSON, or NULL for none.
func BudgetArg(b *authz.Budget) any {
	if b == nil {
		return nil
	}
	j, err := json.Marshal(b)
	if err != nil {
		panic(err) // a Budget always marshals
	}
	return string(j)
}

// BudgetDest is the Scan destination of a budget column into *b.
func BudgetDest(b **authz.Budget) any { return budgetDest{b} }

type budgetDest struct{ b **authz.Budget }

func (d budgetDest) Scan(v any) error {
	var text []byte
	switch v := v.(type) {
	case nil:
		*d.b = nil
		return nil
	case string:
		text = []byte(v)
	case []byte:
		text = v
	default:
		return fmt.Errorf("scanning a budget from %T", v)
	}
	b := new(authz.Budget)
	if err := json.Unmarshal(text, b); err != nil {
		return fmt.Errorf("scanning budget %s: %w", text, err)
	}
	*d.b = b
	return nil
}

// FromMS is a price's From as the prices table keys it: Unix
// milliseconds, 0 for always.
func FromMS(from time.Time) int64 {
	if from.IsZero() {
		return 0
	}
	return from.UnixMilli()
}

// PriceArg is a price's JSON for the prices table.
func PriceArg(p pricing.Price) (string, error) {
	b, err := json.Marshal(p)
	return string(b), err
}

// ScanPrice reads a prices row's JSON.
func ScanPrice(text string) (pricing.Price, error) {
	var p pricing.Price
	if err := json.Unmarshal([]byte(text), &p); err != nil {
		return p, fmt.Errorf("a stored price: %w", err)
	}
	return p, nil
}

// AuditLimit is the number of entries ListAudit returns for q.
func AuditLimit(q authz.AuditQuery) int {
	if q.Limit <= 0 {
		return 50
	}
	return min(q.Limit, 1000)
}

// NullJSON is a JSON column's value: NULL for none.
func NullJSON(b json.RawMessage) any {
	if b == nil {
		return nil
	}
	return string(b)
}

// JSONOf is a JSON column's scanned value: nil for NULL.
func JSONOf(s *string) json.RawMessage {
	if s == nil {
		return nil
	}
	return json.RawMessage(*s)
}

// RequestColumns are the columns ListRequests selects, in the order of
// RequestDest (with the row's time scanned by the dialect's store).
const RequestColumns = `request_id, key_id, account_id, endpoint, model, backend, status, prompt_tokens, completion_tokens,
	total_tokens, cached_tokens, reasoning_tokens, estimated, duration_ms, cost_nanos, audio_ms, images, client_request_id,
	cache_write_tokens, cache_write_1h_tokens, session_id, web_search_requests, guardrails, requested_model, provider_model, at`

// RequestDest are the Scan destinations of RequestColumns but the last
// (at), into r; cost and duration need the scanners given.
func RequestDest(r *ledger.UsageRecord, cost *NullCost, duration *int64) []any {
	return []any{&r.RequestID, &r.KeyID, &r.AccountID, &r.Endpoint, &r.Model, &r.Backend, &r.Status, &r.PromptTokens,
		&r.CompletionTokens, &r.TotalTokens, &r.CachedTokens, &r.ReasoningTokens, &r.Estimated, duration, cost,
		millis{&r.Audio}, &r.Images, &r.ClientRequestID, &r.CacheWriteTokens, &r.CacheWrite1hTokens,
		&r.SessionID, &r.WebSearchRequests, guardDest{&r.Guardrails}, &r.RequestedModel, &r.ProviderModel}
}

// GuardArg is the value of the guardrails column: the outcomes as a JSON
// array of [rule, phase, result] arrays, empty for none. JSON quotes each
// string, so a rule's name, whatever it holds, is never taken for the
// result Dialect.Guard compares; the strings are made Storable, as
// PostgreSQL's jsonb refuses the \u0000 that would stand for a NUL.
func GuardArg(gs []ledger.GuardOutcome) string {
	if len(gs) == 0 {
		return ""
	}
	rows := make([][3]string, len(gs))
	for i, g := range gs {
		rows[i] = [3]string{ledger.Storable(g.Rule), ledger.Storable(g.Phase), ledger.Storable(g.Result)}
	}
	b, err := json.Marshal(rows)
	if err != nil {
		panic(err) // strings always marshal
	}
	return string(b)
}

// guardDest scans a guardrails column (GuardArg) into *gs: nil when empty.
type guardDest struct{ gs *[]ledger.GuardOutcome }

func (d guardDest) Scan(v any) error {
	var text string
	switch v := v.(type) {
	case string:
		text = v
	case []byte:
		text = string(v)
	default:
		return fmt.Errorf("guardrails: unexpected %T", v)
	}
	*d.gs = nil
	if text == "" {
		return nil
	}
	var rows [][3]string
	if err := json.Unmarshal([]byte(text), &rows); err != nil {
		return fmt.Errorf("guardrails %s: %w", text, err)
	}
	*d.gs = make([]ledger.GuardOutcome, len(rows))
	for i, r := range rows {
		(*d.gs)[i] = ledger.GuardOutcome{Rule: r[0], Phase: r[1], Result: r[2]}
	}
	return nil
}

// NullCost scans a cost_nanos column.
type NullCost struct {
	N     int64
	Valid bool
}

// Scan implements sql.Scanner.
func (c *NullCost) Scan(v any) error {
	switch v := v.(type) {
	case nil:
		c.Valid = false
	case int64:
		c.N, c.Valid = v, true
	default:
		return fmt.Errorf("cost: unexpected %T", v)
	}
	return nil
}

// Requests returns the query and arguments of ListRequests, newest
// first.
func (d Dialect) Requests(q ledger.RequestQuery) (string, []any) {
	where := []string{"attempt = 0"}
	var args []any
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, strings.ReplaceAll(cond, "?", d.Param(len(args))))
	}
	if q.RequestID != "" {
		add("request_id = ?", q.RequestID)
	}
	if q.AccountID != "" {
		add("account_id = ?", q.AccountID)
	}
	if q.KeyID != "" {
		add("key_id = ?", q.KeyID)
	}
	if q.Model != "" {
		add("? IN (model, requested_model)", q.Model) // one parameter, as SQLite's ? cannot be named twice
	}
	switch q.Outcome {
	case "ok":
		where = append(where, "status BETWEEN 200 AND 399")
	case "refused":
		where = append(where, "status IN (401, 403, 429)")
	case "failed":
		where = append(where, "NOT (status BETWEEN 200 AND 399 OR status IN (401, 403, 429))")
	}
	if q.Guard != "" {
		add(d.Guard, q.Guard)
	}
	if !q.BeforeAt.IsZero() {
		args = append(args, d.Time(q.BeforeAt), d.Time(q.BeforeAt), q.BeforeID)
		n := len(args)
		where = append(where, fmt.Sprintf("(at < %s OR (at = %s AND request_id < %s))", d.Param(n-2), d.Param(n-1), d.Param(n)))
	}
	limit := q.Limit
	if limit <= 0 {
		limit = 50
	}
	return `SELECT ` + RequestColumns + ` FROM usage WHERE ` + strings.Join(where, " AND ") +
		` ORDER BY at DESC, request_id DESC LIMIT ` + strconv.Itoa(min(limit, 1000)), args
}

// SpentSince returns the query of ledger.UsageStore.SpentSince for subject, its
// arguments being the returned id and then the time since: the sum of the
// known costs of the subject's requests (a Sum, for SumDest), by the
// usage_key_at and usage_account_at indexes (and accounts_group for a
// group's).
func (d Dialect) SpentSince(subject string) (query, id string, err error) {
	kind, id, _ := strings.Cut(subject, ":")
	var where string
	switch kind {
	case "key":
		where = `key_id = ` + d.Param(1)
	case "account":
		where = `account_id = ` + d.Param(1)
	case "group":
		where = `account_id IN (SELECT id FROM accounts WHERE group_id = ` + d.Param(1) + `)`
	}
	if where == "" || id == "" {
		return "", "", fmt.Errorf("spending of %q: want key:<id>, account:<id> or group:<id>", subject)
	}
	return `SELECT ` + Sum(`cost_nanos`) + ` FROM usage WHERE ` + where + ` AND at >= ` + d.Param(2) + ` AND attempt = 0`, id, nil
}

// OneCaptureARequest returns cs without the captures of a request that
// came earlier in cs, as ledger.CaptureStore.SaveCaptures keeps them: cs
// itself when no request repeats, as in every batch the gateway writes.
func OneCaptureARequest(cs []ledger.Capture) []ledger.Capture {
	seen := make(map[string]struct{}, len(cs))
	var out []ledger.Capture // nil until a request repeats
	for i, c := range cs {
		if _, dup := seen[c.RequestID]; !dup {
			seen[c.RequestID] = struct{}{}
			if out != nil {
				out = append(out, c)
			}
			continue
		}
		if out == nil {
			out = append(make([]ledger.Capture, 0, len(cs)-1), cs[:i]...)
		}
	}
	if out == nil {
		return cs
	}
	return out
}

// Output decodes the items of a stored conversation and returns its
// output: the items after the first inputs. The slice is a copy, so that
// the input items, which may be the bulk of a long conversation, are not
// kept alive by it.
func Output(items []byte, inputs int) ([]json.RawMessage, error) {
	var all []json.RawMessage
	if err := json.Unmarshal(items, &all); err != nil {
		return nil, err
	}
	return slices.Clone(all[min(max(inputs, 0), len(all)):]), nil
}
