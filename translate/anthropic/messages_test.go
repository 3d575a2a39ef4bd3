package anthropic

import (
	"encoding/json"
	"testing"
)

// A provider's error reaches a Messages client as Anthropic gave it, but
// a refusal of the gateway's credentials and a body that is no Anthropic
// error become the gateway's api_error.
func TestMessagesError(t *testing.T) {
	const overloaded = `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`
	if got := string(messagesError([]byte(overloaded))); got != overloaded {
		t.Errorf("Anthropic's error: %s", got)
	}
	for _, body := range []string{`{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`, `<html>bad gateway</html>`} {
		var e struct {
			Type  string
			Error struct{ Type, Message string }
		}
		got := messagesError([]byte(body))
		if json.Unmarshal(got, &e) != nil || e.Type != "error" || e.Error.Type != "api_error" || e.Error.Message == "" {
			t.Errorf("%s became %s", body, got)
		}
	}
}
