package pricing

import (
	"sync/atomic"
	"time"
)

// Source gives the price of a model in effect at a time: a *Table, or a
// *Live one.
type Source interface {
	At(model string, at time.Time) (Price, bool)
}

// Live is a Table that can be replaced while it is read, as prices set at
// run time change. The zero Live has no prices.
type Live struct{ t atomic.Pointer[Table] }

// NewLive returns a Live table holding t.
func NewLive(t *Table) *Live {
	l := &Live{}
	l.t.Store(t)
	return l
}

// At implements Source with the table last set.
func (l *Live) At(model string, at time.Time) (Price, bool) { return l.t.Load().At(model, at) }

// Set replaces the table.
func (l *Live) Set(t *Table) { l.t.Store(t) }

// Table returns the table last set.
func (l *Live) Table() *Table { return l.t.Load() }
