package deploytest

import (
	"fmt"
	"slices"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	earlyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/http/early_header_mutation/header_mutation/v3"

	"modelgate/envoy"
)

// EarlyHeaderMutation is the connection manager extension that removes
// request headers before anything else looks at them.
const EarlyHeaderMutation = "envoy.http.early_header_mutation.header_mutation"

// RouterControlHeaders lists the headers a manifest must remove before
// routing, sorted: those through which a client could steer Envoy's
// router, its retries (x-envoy-retry-on with x-envoy-max-retries would
// retry a generation against the provider on a route that has none) and
// its timeouts (envoy.RouterControlHeaders), and whatever else the
// gateway's bootstrap removes with its early header mutation. The router
// reads them after every HTTP filter and before a route's
// request_headers_to_remove applies, so only the connection manager's
// early_header_mutation_extensions, which run first, remove them in time.
func (gw *Gateway) RouterControlHeaders() ([]string, error) {
	boot, err := EarlyRemovals(HCMOf(gw.Boot).GetEarlyHeaderMutationExtensions())
	if err != nil {
		return nil, fmt.Errorf("the bootstrap's early_header_mutation_extensions: %w", err)
	}
	out := slices.Concat(envoy.RouterControlHeaders, boot)
	slices.Sort(out)
	return slices.Compact(out), nil
}

// EarlyRemovals lists the headers a connection manager's
// early_header_mutation_extensions remove by name.
func EarlyRemovals(exts []*corev3.TypedExtensionConfig) ([]string, error) {
	var out []string
	for i, e := range exts {
		m, err := e.GetTypedConfig().UnmarshalNew()
		if err != nil {
			return nil, fmt.Errorf("[%d] %s: %w", i, e.GetName(), err)
		}
		hm, ok := m.(*earlyv3.HeaderMutation)
		if !ok || e.GetName() != EarlyHeaderMutation {
			return nil, fmt.Errorf("[%d] %s: %T, want %s", i, e.GetName(), m, EarlyHeaderMutation)
		}
		if err := hm.ValidateAll(); err != nil {
			return nil, fmt.Errorf("[%d] %s: %w", i, e.GetName(), err)
		}
		for _, mu := range hm.GetMutations() {
			if r := mu.GetRemove(); r != "" {
				out = append(out, r)
			}
		}
	}
	return out, nil
}

// MissingHeaders lists the names of want that removed lacks
// (case-insensitively: header names are).
func MissingHeaders(want, removed []string) []string {
	var missing []string
	for _, h := range want {
		if !slices.ContainsFunc(removed, func(r string) bool { return strings.EqualFold(r, h) }) {
			missing = append(missing, h)
		}
	}
	return missing
}
