package standin

import (
	"net/http"
	"testing"

	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// webSocket is a WebSocket handshake's headers (RFC 6455).
var webSocket = map[string]string{"Connection": "Upgrade", "Upgrade": "websocket",
	"Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==", "Sec-WebSocket-Version": "13"}

// An HTTP/1.1 upgrade of a type the connection manager does not allow is
// refused with a 403 before any filter sees it; one it allows reaches
// ext_proc with its connection and upgrade headers, and ext_proc may
// answer it.
func TestUpgrades(t *testing.T) {
	allow := func(enabled *wrapperspb.BoolValue) func(*hcmv3.HttpConnectionManager) {
		return func(h *hcmv3.HttpConnectionManager) {
			h.UpgradeConfigs = []*hcmv3.HttpConnectionManager_UpgradeConfig{{UpgradeType: "WebSocket", Enabled: enabled}}
		}
	}
	refuse := func(*extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse {
		return immediateReply(&extprocv3.ImmediateResponse{Status: &typev3.HttpStatus{Code: http.StatusUpgradeRequired}, Body: []byte("use HTTP")})
	}
	for name, tc := range map[string]struct {
		hcm    func(*hcmv3.HttpConnectionManager)
		status int
		procd  bool
	}{
		"not configured": {nil, http.StatusForbidden, false},
		"disabled":       {allow(wrapperspb.Bool(false)), http.StatusForbidden, false},
		"allowed":        {allow(nil), http.StatusUpgradeRequired, true},
	} {
		t.Run(name, func(t *testing.T) {
			p := &stubProc{reply: refuse}
			e := startWith(t, p, nil, setup{hcm: tc.hcm})
			r := e.do(t, http.MethodGet, "/v1/responses", "", webSocket)
			if r.err != nil || r.status != tc.status {
				t.Fatalf("status %d, %v; want %d", r.status, r.err, tc.status)
			}
			en := e.entry(t)
			msgs := p.messages()
			if !tc.procd {
				if en.Details != "upgrade_failed" || len(msgs) != 0 {
					t.Errorf("details %q, %d ext_proc messages; want upgrade_failed before any filter", en.Details, len(msgs))
				}
				return
			}
			if len(msgs) != 1 {
				t.Fatalf("%d ext_proc messages", len(msgs))
			}
			got := map[string]string{}
			for _, h := range msgs[0].GetRequestHeaders().GetHeaders().GetHeaders() {
				got[h.GetKey()] = string(h.GetRawValue())
			}
			if got["upgrade"] != "websocket" || got["connection"] != "Upgrade" || got["sec-websocket-key"] == "" {
				t.Errorf("ext_proc saw %v", got)
			}
		})
	}
	// A request without the upgrade token is no upgrade: its upgrade
	// header goes, as any hop-by-hop header does.
	p := &stubProc{reply: refuse}
	e := startWith(t, p, nil, setup{})
	if r := e.do(t, http.MethodGet, "/v1/responses", "", map[string]string{"Upgrade": "websocket"}); r.status != http.StatusUpgradeRequired {
		t.Fatalf("status %d, %v", r.status, r.err)
	}
	for _, h := range p.messages()[0].GetRequestHeaders().GetHeaders().GetHeaders() {
		if h.GetKey() == "upgrade" {
			t.Error("an upgrade header without the connection token reached ext_proc")
		}
	}
}
