package messages

import (
	"errors"
	"testing"

	"modelgate/translate/api"
)

// A member of the wrong type is named, in the client's words rather than
// the gateway's Go types.
func TestToChatNamesWrongTypes(t *testing.T) {
	r, err := api.ParseMessagesRequest([]byte(`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"Hi"}],"tools":"all of them"}`), false)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = ToChat(r)
	var re *api.RequestError
	if !errors.As(err, &re) || re.Param != "tools" || re.Message != "'tools' is of the wrong type: a string was given." {
		t.Errorf("ToChat: %v", err)
	}
}
