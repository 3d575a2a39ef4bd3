package authz

import (
	"encoding/json"
	"fmt"
	"time"

	"modelgate/authz/pricing"
)

// Period is how a Budget renews.
type Period string

// The periods of a Budget.
const (
	// PeriodDay renews at midnight UTC.
	PeriodDay Period = "day"
	// PeriodMonth renews on the first of each month at midnight UTC.
	PeriodMonth Period = "month"
	// PeriodWindow renews every Budget.Window, counted from the Unix epoch.
	PeriodWindow Period = "window"
)

// MaxBudget is the largest budget amount: counters stay exact up to 2^53
// billionths (about 9 million currency units a period).
const MaxBudget pricing.Nanos = 1 << 53

// Budget limits what a key, an account or a group may spend per period,
// in the prices' currency. A group's budget is shared by all its
// accounts; the ratelimit package enforces budgets.
type Budget struct {
	// Amount is what may be spent per period; zero allows nothing.
	Amount pricing.Nanos
	Period Period
	// Window is the period of PeriodWindow: whole seconds, at least a
	// minute. Zero for the other periods.
	Window time.Duration
	// Alerts asks for a log line and a metric when spending reaches 80 %
	// and 100 % of Amount in a period.
	Alerts bool
}

// Validate reports a malformed budget in plain words.
func (b Budget) Validate() error {
	switch {
	case b.Amount < 0 || b.Amount > MaxBudget:
		return fmt.Errorf("the budget's amount must be between 0 and %s", MaxBudget)
	case b.Period == PeriodWindow && (b.Window < time.Minute || b.Window%time.Second != 0):
		return fmt.Errorf("a budget's window must be whole seconds and at least a minute, not %v", b.Window)
	case b.Period == PeriodDay || b.Period == PeriodMonth:
		if b.Window != 0 {
			return fmt.Errorf("a budget per %s has no window", b.Period)
		}
	case b.Period != PeriodWindow:
		return fmt.Errorf("a budget's period must be day, month or window, not %q", b.Period)
	}
	return nil
}

// budgetJSON is a Budget as the admin API and the stores write it.
type budgetJSON struct {
	Amount string `json:"amount"`
	Period Period `json:"period"`
	Window string `json:"window,omitempty"`
	Alerts bool   `json:"alerts,omitempty"`
}

// MarshalJSON writes {"amount": "12.50", "period": "month"}, with
// "window" (a Go duration, as "168h") and "alerts" when set.
func (b Budget) MarshalJSON() ([]byte, error) {
	j := budgetJSON{Amount: b.Amount.String(), Period: b.Period, Alerts: b.Alerts}
	if b.Window != 0 {
		j.Window = b.Window.String()
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads what MarshalJSON writes, the amount as a decimal
// string or a JSON number, and validates it.
func (b *Budget) UnmarshalJSON(data []byte) error {
	var j struct {
		Amount json.RawMessage `json:"amount"`
		Period Period          `json:"period"`
		Window string          `json:"window"`
		Alerts bool            `json:"alerts"`
	}
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	amount := string(j.Amount)
	if len(amount) >= 2 && amount[0] == '"' {
		if err := json.Unmarshal(j.Amount, &amount); err != nil {
			return err
		}
	}
	if amount == "" || amount == "null" {
		return fmt.Errorf("a budget needs an amount")
	}
	n, err := pricing.ParseAmount(amount)
	if err != nil {
		return err
	}
	out := Budget{Amount: n, Period: j.Period, Alerts: j.Alerts}
	if j.Window != "" {
		if out.Window, err = time.ParseDuration(j.Window); err != nil {
			return fmt.Errorf("the budget's window %q: want a duration such as 168h", j.Window)
		}
	}
	if err := out.Validate(); err != nil {
		return err
	}
	*b = out
	return nil
}
