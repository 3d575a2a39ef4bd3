package admin

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"modelgate/authz"
	"modelgate/authz/pricing"
)

// Prices: the config file's, and those set through the admin, which are
// stored and replace a config price of the same model and From.

// sourcedPrice is a price with where it comes from: "config" or "admin".
// Its members are pricing.Price's JSON, with source added: a member
// pricing.Price gains needs nothing here.
type sourcedPrice struct {
	pricing.Price
	Source string `json:"source"`
}

// MarshalJSON adds source to the price's members.
func (p sourcedPrice) MarshalJSON() ([]byte, error) {
	b, err := p.Price.MarshalJSON()
	if err != nil {
		return nil, err
	}
	return append(append(b[:len(b)-1:len(b)-1], `,"source":`...), strconv.Quote(p.Source)+"}"...), nil
}

// priceList is the answer of GET /admin/v1/prices.
type priceList struct {
	Currency string         `json:"currency"`
	Data     []sourcedPrice `json:"data"`
}

// prices returns the prices in effect over time: the config's, with the
// stored ones over them, by model and From.
func (h *Handler) prices(ctx context.Context) ([]sourcedPrice, error) {
	stored, err := h.store.ListPrices(ctx)
	if err != nil {
		return nil, err
	}
	var out []sourcedPrice
	for _, p := range pricing.Overlay(h.cfg.ConfigPrices, stored) {
		src := "config"
		if slices.ContainsFunc(stored, func(q pricing.Price) bool { return q.Model == p.Model && q.From.Equal(p.From) }) {
			src = "admin"
		}
		out = append(out, sourcedPrice{p, src})
	}
	slices.SortFunc(out, func(a, b sourcedPrice) int { return cmp.Or(cmp.Compare(a.Model, b.Model), a.From.Compare(b.From)) })
	return out, nil
}

// setPrice stores a price of a configured model.
func (h *Handler) setPrice(ctx context.Context, p pricing.Price) error {
	if p.Model == "" {
		return badRequest("a price needs a model")
	}
	if len(h.cfg.Models) > 0 && !slices.Contains(h.cfg.Models, p.Model) {
		return badRequest("model %q is not configured", p.Model)
	}
	if _, err := pricing.NewTable([]pricing.Price{p}); err != nil {
		return badRequest("%v", err)
	}
	before, err := h.priceAt(ctx, p.Model, p.From)
	if err != nil {
		return err
	}
	if err := h.store.SetPrice(ctx, p); err != nil {
		return err
	}
	h.cfg.PricesChanged()
	h.audit(ctx, "price.set", priceTarget(p.Model, p.From), before, p)
	return nil
}

// deletePrice removes a stored price; the config file's cannot be.
func (h *Handler) deletePrice(ctx context.Context, model string, from time.Time) error {
	before, err := h.priceAt(ctx, model, from)
	if err != nil {
		return err
	}
	err = h.store.DeletePrice(ctx, model, from)
	switch {
	case errors.Is(err, authz.ErrNotFound) && before != nil:
		return &apiError{Status: http.StatusConflict, Type: "invalid_request_error",
			Message: fmt.Sprintf("the price of %s from %s is set in the config file: change it there, or set one here over it", model, fromText(from))}
	case errors.Is(err, authz.ErrNotFound):
		return &apiError{Status: http.StatusNotFound, Type: "not_found_error",
			Message: fmt.Sprintf("there is no price of %s from %s", model, fromText(from))}
	case err != nil:
		return err
	}
	h.cfg.PricesChanged()
	h.audit(ctx, "price.delete", priceTarget(model, from), before, nil)
	return nil
}

// priceAt returns the price of a model from exactly from, or nil.
func (h *Handler) priceAt(ctx context.Context, model string, from time.Time) (*pricing.Price, error) {
	ps, err := h.prices(ctx)
	if err != nil {
		return nil, err
	}
	for _, p := range ps {
		if p.Model == model && p.From.Equal(from) {
			return &p.Price, nil
		}
	}
	return nil, nil
}

func priceTarget(model string, from time.Time) string {
	return "price " + model + " from " + fromText(from)
}

func fromText(from time.Time) string {
	if from.IsZero() {
		return "always"
	}
	if from.Equal(from.Truncate(24 * time.Hour)) {
		return from.UTC().Format(time.DateOnly)
	}
	return from.UTC().Format(time.RFC3339)
}

func (h *Handler) apiPrices(r *http.Request) (int, any, error) {
	ps, err := h.prices(r.Context())
	return http.StatusOK, priceList{Currency: h.cfg.Currency, Data: nonNilSlice(ps)}, err
}

func (h *Handler) apiSetPrice(r *http.Request) (int, any, error) {
	var p pricing.Price
	if err := decode(r, &p); err != nil {
		return 0, nil, err
	}
	if err := h.setPrice(r.Context(), p); err != nil {
		return 0, nil, err
	}
	return http.StatusOK, sourcedPrice{p, "admin"}, nil
}

func (h *Handler) apiDeletePrice(r *http.Request) (int, any, error) {
	q := r.URL.Query()
	from, err := parseInstant("from", q.Get("from"))
	if err != nil {
		return 0, nil, err
	}
	before, err := h.priceAt(r.Context(), q.Get("model"), from)
	if err != nil {
		return 0, nil, err
	}
	if err := h.deletePrice(r.Context(), q.Get("model"), from); err != nil {
		return 0, nil, err
	}
	return http.StatusOK, sourcedPrice{*before, "admin"}, nil
}

func nonNilSlice[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
