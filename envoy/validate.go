package envoy

import (
	"fmt"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	upstreamsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
)

// validator is what protoc-gen-validate generates.
type validator interface{ ValidateAll() error }

// walk validates m and, because PGV does not look inside Any, unpacks every
// Any it finds and validates that too, recursively.
func walk(m protoreflect.Message, path string, errs *[]error) {
	if a, ok := m.Interface().(*anypb.Any); ok {
		inner, err := a.UnmarshalNew()
		if err != nil {
			*errs = append(*errs, fmt.Errorf("%s: %w", path, err))
			return
		}
		walk(inner.ProtoReflect(), path+"("+a.GetTypeUrl()+")", errs)
		return
	}
	if v, ok := m.Interface().(validator); ok && path == "" || ok && isAnyRoot(path) {
		if err := v.ValidateAll(); err != nil {
			*errs = append(*errs, fmt.Errorf("%s: %w", orRoot(path), err))
		}
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd.Kind() != protoreflect.MessageKind && fd.Kind() != protoreflect.GroupKind {
			return true
		}
		child := path + "." + string(fd.Name())
		switch {
		case fd.IsList():
			for i := range v.List().Len() {
				walk(v.List().Get(i).Message(), fmt.Sprintf("%s[%d]", child, i), errs)
			}
		case fd.IsMap():
			if fd.MapValue().Kind() == protoreflect.MessageKind {
				v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
					walk(mv.Message(), fmt.Sprintf("%s[%s]", child, k.String()), errs)
					return true
				})
			}
		default:
			walk(v.Message(), child, errs)
		}
		return true
	})
}

// isAnyRoot reports whether path ends at a message unpacked from an Any:
// ValidateAll on it covers everything below up to the next Any.
func isAnyRoot(path string) bool { return len(path) > 0 && path[len(path)-1] == ')' }

func orRoot(path string) string {
	if path == "" {
		return "bootstrap"
	}
	return path
}

// crossCheck does what Envoy checks beyond PGV for our configs.
func crossCheck(b *bootstrapv3.Bootstrap) []error {
	clusters := map[string]*clusterv3.Cluster{}
	for _, c := range b.GetStaticResources().GetClusters() {
		clusters[c.GetName()] = c
	}
	var errs []error
	for i, l := range b.GetStaticResources().GetListeners() {
		for j, fc := range l.GetFilterChains() {
			for k, f := range fc.GetFilters() {
				hcm := &hcmv3.HttpConnectionManager{}
				if f.GetTypedConfig() == nil || f.GetTypedConfig().UnmarshalTo(hcm) != nil {
					continue
				}
				at := fmt.Sprintf("listeners[%d].filter_chains[%d].filters[%d]", i, j, k)
				errs = append(errs, checkRoutes(at, hcm.GetRouteConfig(), clusters)...)
				errs = append(errs, checkExtProc(at, hcm, clusters)...)
			}
		}
	}
	return errs
}

func checkRoutes(at string, rc *routev3.RouteConfiguration, clusters map[string]*clusterv3.Cluster) []error {
	var errs []error
	for i, vh := range rc.GetVirtualHosts() {
		for j, r := range vh.GetRoutes() {
			if name := r.GetRoute().GetCluster(); name != "" && clusters[name] == nil {
				errs = append(errs, fmt.Errorf("%s.virtual_hosts[%d].routes[%d]: unknown cluster %q", at, i, j, name))
			}
		}
	}
	return errs
}

func checkExtProc(at string, hcm *hcmv3.HttpConnectionManager, clusters map[string]*clusterv3.Cluster) []error {
	var errs []error
	for i, f := range hcm.GetHttpFilters() {
		ep := &extprocv3.ExternalProcessor{}
		if f.GetTypedConfig() == nil || f.GetTypedConfig().UnmarshalTo(ep) != nil {
			continue
		}
		fat := fmt.Sprintf("%s.http_filters[%d]", at, i)
		pm := ep.GetProcessingMode()
		if pm.GetRequestBodyMode() == extprocv3.ProcessingMode_FULL_DUPLEX_STREAMED && pm.GetRequestTrailerMode() != extprocv3.ProcessingMode_SEND ||
			pm.GetResponseBodyMode() == extprocv3.ProcessingMode_FULL_DUPLEX_STREAMED && pm.GetResponseTrailerMode() != extprocv3.ProcessingMode_SEND {
			errs = append(errs, fmt.Errorf("%s: FULL_DUPLEX_STREAMED needs the trailer mode SEND", fat))
		}
		name := ep.GetGrpcService().GetEnvoyGrpc().GetClusterName()
		c := clusters[name]
		switch {
		case c == nil:
			errs = append(errs, fmt.Errorf("%s: ext_proc cluster %q does not exist", fat, name))
		case !speaksHTTP2(c):
			errs = append(errs, fmt.Errorf("%s: ext_proc cluster %q must speak HTTP/2 for gRPC", fat, name))
		}
	}
	return errs
}

func speaksHTTP2(c *clusterv3.Cluster) bool {
	if c.GetHttp2ProtocolOptions() != nil {
		return true
	}
	a := c.GetTypedExtensionProtocolOptions()["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"]
	opts := &upstreamsv3.HttpProtocolOptions{}
	if a == nil || a.UnmarshalTo(opts) != nil {
		return false
	}
	return opts.GetExplicitHttpConfig().GetHttp2ProtocolOptions() != nil
}
