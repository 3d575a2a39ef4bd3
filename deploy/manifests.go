// Package deploy checks modelgate's deployment artifacts without a
// cluster: every Kubernetes, Envoy Gateway and Istio manifest under
// deploy/ is decoded strictly into its API's Go types, the Envoy
// configuration embedded in them is decoded and validated with
// go-control-plane, and the values that must agree with the gateway
// (ports, the routing header, processing modes) are compared with what
// `modelgate serve` expects. Its tests are the checks; this file is the
// decoder they share.
package deploy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	egv1a1 "github.com/envoyproxy/gateway/api/v1alpha1"
	istioapi "istio.io/api/networking/v1alpha3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// Object is one decoded manifest document.
type Object struct {
	// APIVersion and Kind say which type Value has.
	APIVersion, Kind string
	// Name and Namespace are the object's metadata.
	Name, Namespace string
	// Value is a pointer to the kind's Go type, such as
	// *appsv1.Deployment; for Istio kinds it is the spec's proto message,
	// such as *istioapi.EnvoyFilter.
	Value any
}

// kinds maps "apiVersion/kind" to a constructor of its Go type.
var kinds = map[string]func() any{
	"v1/Service":                         func() any { return &corev1.Service{} },
	"v1/ConfigMap":                       func() any { return &corev1.ConfigMap{} },
	"v1/Secret":                          func() any { return &corev1.Secret{} },
	"v1/ServiceAccount":                  func() any { return &corev1.ServiceAccount{} },
	"v1/Namespace":                       func() any { return &corev1.Namespace{} },
	"apps/v1/Deployment":                 func() any { return &appsv1.Deployment{} },
	"policy/v1/PodDisruptionBudget":      func() any { return &policyv1.PodDisruptionBudget{} },
	"networking.k8s.io/v1/NetworkPolicy": func() any { return &networkingv1.NetworkPolicy{} },

	"gateway.networking.k8s.io/v1/GatewayClass":           func() any { return &gwapiv1.GatewayClass{} },
	"gateway.networking.k8s.io/v1/Gateway":                func() any { return &gwapiv1.Gateway{} },
	"gateway.networking.k8s.io/v1/HTTPRoute":              func() any { return &gwapiv1.HTTPRoute{} },
	"gateway.networking.k8s.io/v1/BackendTLSPolicy":       func() any { return &gwapiv1.BackendTLSPolicy{} },
	"gateway.envoyproxy.io/v1alpha1/EnvoyExtensionPolicy": func() any { return &egv1a1.EnvoyExtensionPolicy{} },
	"gateway.envoyproxy.io/v1alpha1/BackendTrafficPolicy": func() any { return &egv1a1.BackendTrafficPolicy{} },
	"gateway.envoyproxy.io/v1alpha1/ClientTrafficPolicy":  func() any { return &egv1a1.ClientTrafficPolicy{} },
	"gateway.envoyproxy.io/v1alpha1/Backend":              func() any { return &egv1a1.Backend{} },
	"gateway.envoyproxy.io/v1alpha1/EnvoyProxy":           func() any { return &egv1a1.EnvoyProxy{} },
	"gateway.envoyproxy.io/v1alpha1/HTTPRouteFilter":      func() any { return &egv1a1.HTTPRouteFilter{} },
}

// istioKinds maps the Istio kinds to their spec's proto message: the
// client-go wrappers accept unknown fields, so specs are decoded with
// protojson, which does not.
var istioKinds = map[string]func() proto.Message{
	"networking.istio.io/v1alpha3/EnvoyFilter": func() proto.Message { return &istioapi.EnvoyFilter{} },
	"networking.istio.io/v1/ServiceEntry":      func() proto.Message { return &istioapi.ServiceEntry{} },
	"networking.istio.io/v1/DestinationRule":   func() proto.Message { return &istioapi.DestinationRule{} },
	"networking.istio.io/v1/Gateway":           func() proto.Message { return &istioapi.Gateway{} },
	"networking.istio.io/v1/VirtualService":    func() proto.Message { return &istioapi.VirtualService{} },
}

// Decode decodes every document of a YAML stream strictly: duplicate
// keys, unknown fields (case-sensitively) and unknown kinds are errors,
// each naming the document.
func Decode(data []byte) ([]Object, error) {
	var objs []Object
	var errs []error
	for i, doc := range SplitDocuments(data) {
		obj, err := decodeDocument(doc)
		if err != nil {
			errs = append(errs, fmt.Errorf("document %d: %w", i, err))
			continue
		}
		objs = append(objs, obj)
	}
	return objs, errors.Join(errs...)
}

// SplitDocuments splits a YAML stream at its "---" lines, leaving out
// documents that hold only comments and blank lines.
func SplitDocuments(data []byte) [][]byte {
	var docs [][]byte
	var cur bytes.Buffer
	flush := func() {
		if hasContent(cur.Bytes()) {
			docs = append(docs, bytes.Clone(cur.Bytes()))
		}
		cur.Reset()
	}
	for line := range bytes.SplitAfterSeq(data, []byte("\n")) {
		if t := bytes.TrimRight(line, " \t\r\n"); bytes.Equal(t, []byte("---")) {
			flush()
			continue
		}
		cur.Write(line)
	}
	flush()
	return docs
}

func hasContent(doc []byte) bool {
	for line := range bytes.SplitSeq(doc, []byte("\n")) {
		if t := bytes.TrimSpace(line); len(t) > 0 && t[0] != '#' {
			return true
		}
	}
	return false
}

func decodeDocument(doc []byte) (Object, error) {
	j, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return Object{}, err
	}
	var head struct {
		metav1.TypeMeta `json:",inline"`
		Metadata        metav1.ObjectMeta `json:"metadata"`
	}
	if err := json.Unmarshal(j, &head); err != nil {
		return Object{}, err
	}
	obj := Object{APIVersion: head.APIVersion, Kind: head.Kind, Name: head.Metadata.Name, Namespace: head.Metadata.Namespace}
	key := head.APIVersion + "/" + head.Kind
	if newSpec, ok := istioKinds[key]; ok {
		var wrapper struct {
			metav1.TypeMeta `json:",inline"`
			Metadata        metav1.ObjectMeta `json:"metadata"`
			Spec            json.RawMessage   `json:"spec"`
		}
		if err := strictJSON(j, &wrapper); err != nil {
			return obj, err
		}
		spec := newSpec()
		if err := protojson.Unmarshal(wrapper.Spec, spec); err != nil {
			return obj, fmt.Errorf("%s %q: spec: %w", head.Kind, obj.Name, err)
		}
		obj.Value = spec
		return obj, nil
	}
	newObj, ok := kinds[key]
	if !ok {
		return obj, fmt.Errorf("unknown kind %s", key)
	}
	obj.Value = newObj()
	if err := strictJSON(j, obj.Value); err != nil {
		return obj, fmt.Errorf("%s %q: %w", head.Kind, obj.Name, err)
	}
	return obj, nil
}

// strictJSON decodes case-sensitively and refuses unknown and duplicate
// fields (sigs.k8s.io/yaml's own strict decoding is case-insensitive).
func strictJSON(j []byte, v any) error {
	strict, err := kjson.UnmarshalStrict(j, v, kjson.DisallowDuplicateFields, kjson.DisallowUnknownFields)
	if err != nil {
		return err
	}
	return errors.Join(strict...)
}

// Find returns the objects of a kind, in order.
func Find[T any](objs []Object) []T {
	var out []T
	for _, o := range objs {
		if v, ok := o.Value.(T); ok {
			out = append(out, v)
		}
	}
	return out
}

// KindNames lists "Kind/name" of every object, for messages.
func KindNames(objs []Object) string {
	var names []string
	for _, o := range objs {
		names = append(names, o.Kind+"/"+o.Name)
	}
	return strings.Join(names, ", ")
}
