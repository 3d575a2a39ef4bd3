package config

import (
	"cmp"

	"modelgate/envoy/routing"
)

// Routing is the routing the file describes, resolved: what the ext_proc
// server routes by and what Envoy's configuration is generated from.
// Each model's fallback takes its unset members from the top-level one.
func (cfg *Config) Routing() routing.Table {
	var t routing.Table
	for _, b := range cfg.Backends {
		t.Backends = append(t.Backends, routing.Backend{Name: b.Name, Provider: b.Provider, BaseURL: b.BaseURL,
			APIVersion: b.APIVersion, Region: b.Region, Project: b.Project, Timeouts: b.Timeouts.resolved()})
	}
	for _, m := range cfg.Models {
		c := m.Capabilities
		rm := routing.Model{ID: m.ID, OwnedBy: m.OwnedBy, Created: m.Created, ContextWindow: m.ContextWindow,
			ReasoningEfforts: m.ReasoningEfforts, WebSearch: m.WebSearch, AutoCache: m.AutoCache,
			Timeouts: m.Timeouts.resolved(), Capabilities: routing.Capabilities{Input: c.Input, Tools: c.Tools,
				JSONSchema: c.JSONSchema, Reasoning: c.Reasoning, MaxOutput: c.MaxOutput, Drop: c.Drop}}
		for _, a := range m.Aliases {
			rm.Aliases = append(rm.Aliases, a.Name)
			if a.Listed {
				rm.Listed = append(rm.Listed, a.Name)
			}
		}
		if m.Auto != nil {
			rm.Auto = &routing.Auto{Candidates: m.Auto.Candidates, Prefer: cmp.Or(m.Auto.Prefer, "cheapest")}
		}
		for _, d := range m.Deployments {
			rm.Deployments = append(rm.Deployments, routing.Deployment(d))
		}
		if m.Fallback != nil {
			f := m.Fallback.Or(cfg.Fallback)
			rm.Fallback = &routing.Fallback{Retries: f.Retries, MaxRetryAfter: f.MaxRetryAfter.Duration,
				BudgetPercent: f.RetryBudgetPercent, Outlier: routing.Outlier{Consecutive: f.Outlier.Consecutive,
					Interval: f.Outlier.Interval.Duration, BaseEjection: f.Outlier.BaseEjection.Duration}}
			for _, c := range f.RetryOn {
				rm.Fallback.RetryOn = append(rm.Fallback.RetryOn, routing.RetryCondition(c))
			}
		}
		t.Models = append(t.Models, rm)
	}
	return t
}

func (t Timeouts) resolved() routing.Timeouts {
	return routing.Timeouts{ResponseHeaders: t.ResponseHeaders.Duration, StreamIdle: t.StreamIdle.Duration}
}
