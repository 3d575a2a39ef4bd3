package main

import (
	"context"
	"time"

	"go.uber.org/zap"

	"modelgate/authz"
	"modelgate/authz/pricing"
)

// pricesInterval is how often a replica reads the prices set through the
// admin: a price set on another replica applies here within it.
const pricesInterval = 10 * time.Second

// livePrices are the prices the gateway charges: the config file's, with
// those set through the admin (in the store) over them.
type livePrices struct {
	*pricing.Live
	base  []pricing.Price
	store authz.Prices
	log   *zap.Logger
}

func newLivePrices(base *pricing.Table, store authz.Prices, log *zap.Logger) *livePrices {
	return &livePrices{Live: pricing.NewLive(base), base: base.Prices(), store: store, log: log}
}

// reload reads the stored prices and replaces the table. On failure the
// table in use stays, and the failure is logged.
func (p *livePrices) reload(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	stored, err := p.store.ListPrices(ctx)
	if err != nil {
		p.log.Error("reading the prices set through the admin; keeping those in use", zap.Error(err))
		return
	}
	t, err := pricing.NewTable(pricing.Overlay(p.base, stored))
	if err != nil {
		p.log.Error("the prices set through the admin do not make a table; keeping those in use", zap.Error(err))
		return
	}
	p.Set(t)
}

// watch reloads the prices every pricesInterval until quit closes.
func (p *livePrices) watch(quit <-chan struct{}) {
	t := time.NewTicker(pricesInterval)
	defer t.Stop()
	for {
		select {
		case <-quit:
			return
		case <-t.C:
			p.reload(context.Background())
		}
	}
}
