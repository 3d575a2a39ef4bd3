package envoygateway_test

// The Gateway's policies: the ClientTrafficPolicy is the bootstrap's
// listener, the EnvoyExtensionPolicy its ext_proc filter and cluster.

import (
	"errors"
	"fmt"
	"slices"
	"time"

	egv1a1 "github.com/envoyproxy/gateway/api/v1alpha1"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"modelgate/deploy"
	"modelgate/deploy/deploytest"
)

// check runs every cross-check and returns all problems.
func check(objs []deploy.Object, gw *deploytest.Gateway) []error {
	g, errs := checkGateway(objs)
	if g == nil {
		return errs
	}
	errs = append(errs, checkClientTraffic(objs, gw, g)...)
	errs = append(errs, checkExtProc(objs, gw, g)...)
	errs = append(errs, checkRoutes(objs, gw, g)...)
	return append(errs, checkModelPaths(objs, gw.Cfg, gw, g)...)
}

func checkGateway(objs []deploy.Object) (*gwapiv1.Gateway, []error) {
	gs := deploy.Find[*gwapiv1.Gateway](objs)
	if len(gs) != 1 {
		return nil, []error{fmt.Errorf("want one Gateway, got %d", len(gs))}
	}
	g := gs[0]
	var errs []error
	for _, c := range deploy.Find[*gwapiv1.GatewayClass](objs) {
		if c.Name == string(g.Spec.GatewayClassName) && c.Spec.ControllerName != egv1a1.GatewayControllerName {
			errs = append(errs, fmt.Errorf("GatewayClass %s: controllerName %q, want Envoy Gateway's %q", c.Name, c.Spec.ControllerName, egv1a1.GatewayControllerName))
		}
	}
	return g, errs
}

// targets reports whether a policy in namespace ns attaches to the whole
// object kind/name there (sectionName "" ) or to one section of it.
func targets(refs egv1a1.PolicyTargetReferences, ns, policyNS, kind, name, section string) bool {
	if ns != policyNS {
		return false
	}
	for _, r := range refs.TargetRefs {
		if r.Group == gwapiv1.GroupName && string(r.Kind) == kind && string(r.Name) == name &&
			(r.SectionName == nil || string(*r.SectionName) == section) {
			return true
		}
	}
	return false
}

func checkClientTraffic(objs []deploy.Object, gw *deploytest.Gateway, g *gwapiv1.Gateway) []error {
	var ps []*egv1a1.ClientTrafficPolicy
	for _, p := range deploy.Find[*egv1a1.ClientTrafficPolicy](objs) {
		if targets(p.Spec.PolicyTargetReferences, g.Namespace, p.Namespace, "Gateway", g.Name, "") {
			ps = append(ps, p)
		}
	}
	if len(ps) != 1 {
		return []error{fmt.Errorf("want one ClientTrafficPolicy on Gateway %s, got %d", g.Name, len(ps))}
	}
	p, errs := ps[0], []error(nil)
	at := "ClientTrafficPolicy " + p.Name
	want := int64(deploytest.ListenerOf(gw.Boot).GetPerConnectionBufferLimitBytes().GetValue())
	limits := max(gw.Cfg.Limits.MaxRequestBodyBytes, gw.Cfg.Limits.MaxAudioBytes)
	if c := p.Spec.Connection; c == nil || c.BufferLimit == nil || c.BufferLimit.Value() < want || c.BufferLimit.Value() <= limits {
		errs = append(errs, fmt.Errorf("%s: connection.bufferLimit must be at least the bootstrap listener's %d bytes and above the largest request body (%d)", at, want, limits))
	}
	var ht *egv1a1.HTTPClientTimeout
	if p.Spec.Timeout != nil {
		ht = p.Spec.Timeout.HTTP
	}
	if ht == nil {
		ht = &egv1a1.HTTPClientTimeout{}
	}
	h := deploytest.HCMOf(gw.Boot)
	errs = append(errs, nonNil(
		sameDuration(at+" timeout.http.requestReceivedTimeout", "the bootstrap's request_timeout", ht.RequestReceivedTimeout, h.GetRequestTimeout()),
		atLeast(at+" timeout.http.streamIdleTimeout", "the bootstrap's stream_idle_timeout", ht.StreamIdleTimeout, h.GetStreamIdleTimeout()),
		atLeast(at+" timeout.http.streamIdleTimeout", "the config's longest timeouts.response_headers or stream_idle + 10s",
			ht.StreamIdleTimeout, durationpb.New(deploytest.LongestPath(gw.Cfg)+deploytest.IdleMargin)),
	)...)
	return append(errs, checkEarlyHeaders(at, p, gw)...)
}

// checkEarlyHeaders: the policy removes every header through which a
// client could steer the router, before routing, as the bootstrap does.
func checkEarlyHeaders(at string, p *egv1a1.ClientTrafficPolicy, gw *deploytest.Gateway) []error {
	want, err := gw.RouterControlHeaders()
	if err != nil {
		return []error{err}
	}
	var removed []string
	if h := p.Spec.Headers; h != nil && h.EarlyRequestHeaders != nil {
		removed = h.EarlyRequestHeaders.Remove
	}
	if missing := deploytest.MissingHeaders(want, removed); len(missing) > 0 {
		return []error{fmt.Errorf("%s: headers.earlyRequestHeaders.remove lacks %q: a client could steer Envoy's retries and timeouts with them (the bootstrap's early_header_mutation_extensions remove them)", at, missing)}
	}
	return nil
}

// atLeast requires an API duration to be set, non-zero and at least a
// bootstrap one.
func atLeast(what, wantWhat string, got *gwapiv1.Duration, want *durationpb.Duration) error {
	if got == nil {
		return fmt.Errorf("%s: unset, want at least %v (%s)", what, want.AsDuration(), wantWhat)
	}
	d, err := parseDuration(*got)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if d == 0 || d < want.AsDuration() {
		return fmt.Errorf("%s: %s, want at least %v (%s)", what, *got, want.AsDuration(), wantWhat)
	}
	return nil
}

// nonNil drops the nil errors.
func nonNil(errs ...error) []error {
	var out []error
	for _, e := range errs {
		if e != nil {
			out = append(out, e)
		}
	}
	return out
}

// sameDuration compares an API duration with a bootstrap one; nil (or an
// absent field) must meet nil.
func sameDuration(what, wantWhat string, got *gwapiv1.Duration, want *durationpb.Duration) error {
	if got == nil && want == nil {
		return nil
	}
	if got == nil {
		return fmt.Errorf("%s: unset, want %v (%s)", what, want.AsDuration(), wantWhat)
	}
	d, err := parseDuration(*got)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if want == nil || d != want.AsDuration() {
		return fmt.Errorf("%s: %s, want %v (%s)", what, *got, want.AsDuration(), wantWhat)
	}
	return nil
}

func checkExtProc(objs []deploy.Object, gw *deploytest.Gateway, g *gwapiv1.Gateway) []error {
	var errs []error
	var eps []*egv1a1.EnvoyExtensionPolicy
	for _, p := range deploy.Find[*egv1a1.EnvoyExtensionPolicy](objs) {
		if targets(p.Spec.PolicyTargetReferences, g.Namespace, p.Namespace, "Gateway", g.Name, "") {
			eps = append(eps, p)
			continue
		}
		// A route's own policy replaces the Gateway's there (EG
		// internal/gatewayapi/envoyextensionpolicy.go, "overrides").
		errs = append(errs, fmt.Errorf("EnvoyExtensionPolicy %s: attaches to something else than Gateway %s; on a route it would replace modelgate there", p.Name, g.Name))
	}
	if len(eps) != 1 || len(eps[0].Spec.ExtProc) != 1 {
		return append(errs, fmt.Errorf("want one EnvoyExtensionPolicy with one extProc on Gateway %s", g.Name))
	}
	p := eps[0]
	ep := &p.Spec.ExtProc[0]
	at := "EnvoyExtensionPolicy " + p.Name + " extProc[0]"
	errs = append(errs, checkExtProcService(at, p.Namespace, ep, gw)...)

	got, err := translateExtProc(ep)
	if err != nil {
		return append(errs, fmt.Errorf("%s: %w", at, err))
	}
	// The response attributes are compared apart: Envoy Gateway asks for
	// more than the bootstrap.
	ignore := protocmp.IgnoreFields(&extprocv3.ExternalProcessor{}, "grpc_service", "response_attributes")
	for name, want := range gw.ExtProcs {
		if diff := cmp.Diff(want, got, protocmp.Transform(), ignore); diff != "" {
			errs = append(errs, fmt.Errorf("%s: the ext_proc filter Envoy Gateway generates differs from the bootstrap's for %s (-bootstrap +generated):\n%s", at, name, diff))
		}
		if missing := missingAttributes(want.GetResponseAttributes(), got.GetResponseAttributes()); len(missing) > 0 {
			errs = append(errs, fmt.Errorf("%s: processingMode.response.attributes lacks %q, which the bootstrap for %s asks for", at, missing, name))
		}
		got.GrpcService = want.GetGrpcService()
		if err := got.ValidateAll(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", at, err))
		}
	}
	// Without local_reply_config (Envoy Gateway has no API for it),
	// modelgate tells Envoy's own replies by their code details.
	if !slices.Contains(got.GetResponseAttributes(), codeDetails) {
		errs = append(errs, fmt.Errorf("%s: processingMode.response.attributes lacks %q: modelgate would record Envoy's own 503 and 504 as the provider's", at, codeDetails))
	}
	return append(errs, checkExtProcCluster(at, ep.BackendSettings, gw)...)
}

// codeDetails is the attribute that tells Envoy's own replies (anything
// but "via_upstream") from the provider's answers.
const codeDetails = "response.code_details"

// missingAttributes lists the attributes of want that got lacks.
func missingAttributes(want, got []string) []string {
	var missing []string
	for _, a := range want {
		if !slices.Contains(got, a) {
			missing = append(missing, a)
		}
	}
	return missing
}

// checkExtProcService: the backend is the ClusterIP Service of
// ../kubernetes on the config's gRPC port.
func checkExtProcService(at, ns string, ep *egv1a1.ExtProc, gw *deploytest.Gateway) []error {
	if len(ep.BackendRefs) != 1 {
		return []error{fmt.Errorf("%s: want one backendRef", at)}
	}
	ref := ep.BackendRefs[0]
	if ref.Group != nil && *ref.Group != "" || ref.Kind != nil && *ref.Kind != "Service" {
		return []error{fmt.Errorf("%s: backendRefs[0] must be a core Service", at)}
	}
	if ref.Namespace != nil {
		ns = string(*ref.Namespace)
	}
	var errs []error
	want, err := deploytest.GRPCPort(gw.Cfg)
	if err != nil {
		return []error{err}
	}
	if ref.Port == nil || int32(*ref.Port) != want {
		errs = append(errs, fmt.Errorf("%s: backendRefs[0] port %v, want server.grpc_listen's port %d", at, deref(ref.Port), want))
	}
	svc, ok := gw.Services[ns+"/"+string(ref.Name)]
	if !ok {
		return append(errs, fmt.Errorf("%s: Service %s/%s is not in %s", at, ns, ref.Name, deploytest.KubernetesDir))
	}
	if svc.Spec.ClusterIP == "None" {
		errs = append(errs, fmt.Errorf("%s: Service %s is headless; Envoy Gateway balances over a ClusterIP Service's EndpointSlices", at, svc.Name))
	}
	found := false
	for _, sp := range svc.Spec.Ports {
		if ref.Port != nil && sp.Port == int32(*ref.Port) {
			found = true
			if tp := sp.TargetPort; tp.String() != "grpc" && tp.IntValue() != int(want) {
				errs = append(errs, fmt.Errorf("%s: Service %s port %d targets %s, want the container port grpc (%d)", at, svc.Name, sp.Port, tp.String(), want))
			}
		}
	}
	if !found && ref.Port != nil {
		errs = append(errs, fmt.Errorf("%s: Service %s has no port %d", at, svc.Name, *ref.Port))
	}
	return errs
}

// translateExtProc is what Envoy Gateway makes of an extProc: buildExtProc
// (internal/gatewayapi/envoyextensionpolicy.go) and extProcConfig,
// buildProcessingMode (internal/xds/translator/extproc.go), v1.9.1.
func translateExtProc(ep *egv1a1.ExtProc) (*extprocv3.ExternalProcessor, error) {
	bodyModes := map[egv1a1.ExtProcBodyProcessingMode]extprocv3.ProcessingMode_BodySendMode{
		egv1a1.BufferedExtProcBodyProcessingMode:          extprocv3.ProcessingMode_BUFFERED,
		egv1a1.BufferedPartialExtBodyHeaderProcessingMode: extprocv3.ProcessingMode_BUFFERED_PARTIAL,
		egv1a1.StreamedExtProcBodyProcessingMode:          extprocv3.ProcessingMode_STREAMED,
		egv1a1.FullDuplexStreamedExtBodyProcessingMode:    extprocv3.ProcessingMode_FULL_DUPLEX_STREAMED,
	}
	pm := &extprocv3.ProcessingMode{RequestHeaderMode: extprocv3.ProcessingMode_SKIP, ResponseHeaderMode: extprocv3.ProcessingMode_SKIP,
		RequestTrailerMode: extprocv3.ProcessingMode_SKIP, ResponseTrailerMode: extprocv3.ProcessingMode_SKIP}
	out := &extprocv3.ExternalProcessor{ProcessingMode: pm}
	body := func(o *egv1a1.ProcessingModeOptions, header *extprocv3.ProcessingMode_HeaderSendMode,
		mode *extprocv3.ProcessingMode_BodySendMode, trailer *extprocv3.ProcessingMode_HeaderSendMode, attrs *[]string) error {
		if o == nil {
			return nil
		}
		*header = extprocv3.ProcessingMode_SEND
		*attrs = slices.Clone(o.Attributes)
		if o.Body == nil {
			return nil
		}
		m, ok := bodyModes[*o.Body]
		if !ok { // Envoy Gateway would silently send no body (NONE)
			return fmt.Errorf("body %q is not a body processing mode", *o.Body)
		}
		*mode = m
		if m == extprocv3.ProcessingMode_FULL_DUPLEX_STREAMED {
			*trailer = extprocv3.ProcessingMode_SEND
		}
		return nil
	}
	if m := ep.ProcessingMode; m != nil {
		if err := errors.Join(
			body(m.Request, &pm.RequestHeaderMode, &pm.RequestBodyMode, &pm.RequestTrailerMode, &out.RequestAttributes),
			body(m.Response, &pm.ResponseHeaderMode, &pm.ResponseBodyMode, &pm.ResponseTrailerMode, &out.ResponseAttributes),
		); err != nil {
			return nil, err
		}
		out.AllowModeOverride = m.AllowModeOverride
	}
	if ep.MessageTimeout != nil {
		d, err := parseDuration(*ep.MessageTimeout)
		if err != nil {
			return nil, fmt.Errorf("messageTimeout: %w", err)
		}
		out.MessageTimeout = durationpb.New(d)
	}
	if ep.FailOpen != nil {
		out.FailureModeAllow = *ep.FailOpen
	}
	if ep.ShadowMode != nil {
		out.ObservabilityMode = *ep.ShadowMode
	}
	if md := ep.Metadata; md != nil && (md.AccessibleNamespaces != nil || md.WritableNamespaces != nil) {
		out.MetadataOptions = &extprocv3.MetadataOptions{}
		if md.AccessibleNamespaces != nil {
			out.MetadataOptions.ForwardingNamespaces = &extprocv3.MetadataOptions_MetadataNamespaces{Untyped: md.AccessibleNamespaces}
		}
		if md.WritableNamespaces != nil {
			out.MetadataOptions.ReceivingNamespaces = &extprocv3.MetadataOptions_MetadataNamespaces{Untyped: md.WritableNamespaces}
		}
	}
	if ep.StatusOnError != nil {
		return nil, errors.New("statusOnError needs Envoy Gateway v1.9; the bootstrap leaves Envoy's 500")
	}
	return out, nil
}

// checkExtProcCluster compares backendSettings with the bootstrap's
// ext_proc cluster: buffer, circuit breakers, health check.
func checkExtProcCluster(at string, s *egv1a1.ClusterSettings, gw *deploytest.Gateway) []error {
	c := deploytest.ClusterOf(gw.Boot, "modelgate_extproc")
	if c == nil {
		return []error{errors.New("the bootstrap has no cluster modelgate_extproc")}
	}
	if s == nil {
		s = &egv1a1.ClusterSettings{}
	}
	errs := checkClusterSettings(at+" backendSettings", s, c.GetPerConnectionBufferLimitBytes().GetValue(), c.GetCircuitBreakers())
	hcs := c.GetHealthChecks()
	if len(hcs) != 1 {
		return errs
	}
	want := hcs[0]
	var a *egv1a1.ActiveHealthCheck
	if s.HealthCheck != nil {
		a = s.HealthCheck.Active
	}
	if a == nil || a.Type != egv1a1.ActiveHealthCheckerTypeGRPC || want.GetGrpcHealthCheck() == nil {
		return append(errs, fmt.Errorf("%s backendSettings.healthCheck.active: want type GRPC as the bootstrap's ext_proc cluster", at))
	}
	got := &corev3.HealthCheck{HealthChecker: &corev3.HealthCheck_GrpcHealthCheck_{GrpcHealthCheck: &corev3.HealthCheck_GrpcHealthCheck{}}}
	if a.GRPC != nil && a.GRPC.Service != nil {
		got.GetGrpcHealthCheck().ServiceName = *a.GRPC.Service
	}
	for _, d := range []struct {
		in  *gwapiv1.Duration
		out **durationpb.Duration
	}{{a.Interval, &got.Interval}, {a.Timeout, &got.Timeout}} {
		if d.in != nil {
			v, err := parseDuration(*d.in)
			if err != nil {
				return append(errs, err)
			}
			*d.out = durationpb.New(v)
		}
	}
	if a.UnhealthyThreshold != nil {
		got.UnhealthyThreshold = wrapU32(*a.UnhealthyThreshold)
	}
	if a.HealthyThreshold != nil {
		got.HealthyThreshold = wrapU32(*a.HealthyThreshold)
	}
	ignore := protocmp.IgnoreFields(&corev3.HealthCheck{}, "no_traffic_interval")
	if diff := cmp.Diff(want, got, protocmp.Transform(), ignore); diff != "" {
		errs = append(errs, fmt.Errorf("%s backendSettings.healthCheck: the unhealthy/healthy thresholds, interval and timeout differ from the bootstrap's (-bootstrap +generated):\n%s", at, diff))
	}
	return errs
}

// parseDuration reads a Gateway API duration, a subset of Go's syntax.
func parseDuration(d gwapiv1.Duration) (time.Duration, error) {
	return time.ParseDuration(string(d))
}

func wrapU32(v uint32) *wrapperspb.UInt32Value { return wrapperspb.UInt32(v) }
