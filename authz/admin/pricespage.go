package admin

import (
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"modelgate/authz/pricing"
)

// The dashboard's prices and audit log pages.

// pricesData is the prices page, with the price form's values.
type pricesData struct {
	Prices []sourcedPrice
	New    priceForm
}

// priceForm is the price form as typed.
type priceForm struct {
	Model, From, Input, CachedInput, CacheWriteInput, CacheWrite1hInput, Output, Reasoning, AudioSecond, WebSearch, Images string
}

func (h *Handler) pricesPage(w http.ResponseWriter, r *http.Request, v view) error {
	return h.renderPrices(w, r, v, http.StatusOK, priceForm{})
}

func (h *Handler) renderPrices(w http.ResponseWriter, r *http.Request, v view, status int, typed priceForm) error {
	ps, err := h.prices(r.Context())
	if err != nil {
		return err
	}
	h.renderPage(w, r, v, status, "prices", "Prices", pricesData{ps, typed})
	return nil
}

func (h *Handler) pricesSet(w http.ResponseWriter, r *http.Request, v view) error {
	f := priceForm{Model: r.PostFormValue("model"), From: strings.TrimSpace(r.PostFormValue("from")),
		Input: r.PostFormValue("input"), CachedInput: r.PostFormValue("cached_input"),
		CacheWriteInput: r.PostFormValue("cache_write_input"), CacheWrite1hInput: r.PostFormValue("cache_write_1h_input"), Output: r.PostFormValue("output"),
		Reasoning: r.PostFormValue("reasoning"), AudioSecond: r.PostFormValue("audio_second"), WebSearch: r.PostFormValue("web_search"),
		Images: r.PostFormValue("images")}
	p, err := f.price()
	if err == nil {
		err = h.setPrice(r.Context(), p)
	}
	if status, ok := h.refused(r, err, "set-price", &v); ok {
		return h.renderPrices(w, r, v, status, f)
	}
	if err != nil {
		return err
	}
	return seeOther(w, r, "/admin/prices", "saved")
}

// price reads the form: amounts per million tokens, per audio second, per
// web search and per image; empty cached input, cache writes and reasoning take input's
// (the hour's writes the five minutes') and output's.
func (f priceForm) price() (pricing.Price, error) {
	p := pricing.Price{Model: f.Model}
	var err error
	if p.From, err = pricing.ParseInstant(f.From); err != nil {
		return p, badRequest("From: %v.", err)
	}
	p.From = p.From.UTC()
	amount := func(label, s string, dst *pricing.Nanos) {
		if s = strings.TrimSpace(s); s == "" || err != nil {
			return
		}
		var e error
		if *dst, e = pricing.ParseAmount(s); e != nil {
			err = badRequest("%s: %q is not an amount such as 2.50.", label, s)
		}
	}
	optional := func(label, s string) *pricing.Nanos {
		if strings.TrimSpace(s) == "" {
			return nil
		}
		var n pricing.Nanos
		amount(label, s, &n)
		return &n
	}
	amount("Input", f.Input, &p.Input)
	amount("Output", f.Output, &p.Output)
	amount("Audio second", f.AudioSecond, &p.AudioSecond)
	amount("Web search", f.WebSearch, &p.WebSearch)
	p.CachedInput = optional("Cached input", f.CachedInput)
	p.CacheWriteInput = optional("Cache writes", f.CacheWriteInput)
	p.CacheWrite1hInput = optional("Cache writes for an hour", f.CacheWrite1hInput)
	p.Reasoning = optional("Reasoning", f.Reasoning)
	// Images: one a line, "size quality amount", "*" for any size or
	// quality.
	for line := range strings.SplitSeq(f.Images, "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if len(fields) != 3 {
			return p, badRequest("Images: %q is not a line such as 1024x1024 hd 0.08.", strings.TrimSpace(line))
		}
		img := pricing.ImagePrice{Size: strings.Trim(fields[0], "*"), Quality: strings.Trim(fields[1], "*")}
		amount("Images", fields[2], &img.Each)
		p.Images = append(p.Images, img)
	}
	return p, err
}

func (h *Handler) pricesDelete(w http.ResponseWriter, r *http.Request, v view) error {
	from, err := pricing.ParseInstant(r.PostFormValue("from"))
	if err != nil {
		return badRequest("From: %v.", err)
	}
	if err := h.deletePrice(r.Context(), r.PostFormValue("model"), from.UTC()); err != nil {
		return err
	}
	return seeOther(w, r, "/admin/prices", "deleted")
}

// auditData is a page of the audit log.
type auditData struct {
	Entries []auditJSON
	Target  string
	// Next is the query of the next page; empty on the last.
	Next template.URL
}

func (h *Handler) auditPageHTML(w http.ResponseWriter, r *http.Request, v view) error {
	l, err := h.auditPage(r)
	if err != nil {
		return err
	}
	d := auditData{Entries: l.Data, Target: r.URL.Query().Get("target")}
	if l.NextBefore != nil {
		q := url.Values{"before": {itoa(*l.NextBefore)}}
		if d.Target != "" {
			q.Set("target", d.Target)
		}
		d.Next = template.URL(q.Encode()) // an encoded query: safe in a link
	}
	h.renderPage(w, r, v, http.StatusOK, "audit", "Audit log", d)
	return nil
}

// fromInput is a price's From for a form: a date, or nothing for always.
func fromInput(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return fromText(t)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
