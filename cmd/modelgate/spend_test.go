package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"modelgate/translate/api/spec"
)

// Through `modelgate dev`: a price set through the admin API applies to
// the next request at once; a monthly budget set on the account stops it
// with OpenAI's 429 insufficient_quota once spent; and the usage report
// shows what it cost.
func TestDevPricesAndBudgets(t *testing.T) {
	a := startDev(t, func(string) string { return "" })
	if status, body := a.admin(t, "PUT", "/admin/v1/prices", `{"model":"gpt-4o-mini","input":"1000","output":"1000"}`); status != 200 {
		t.Fatalf("setting a price: %d %s", status, body)
	}
	var accounts struct{ Data []struct{ ID string } }
	if _, body := a.admin(t, "GET", "/admin/v1/accounts", ""); json.Unmarshal(body, &accounts) != nil || len(accounts.Data) != 1 {
		t.Fatalf("accounts: %s", body)
	}
	acct := accounts.Data[0].ID
	// The recorded answer has 385 tokens: 0.385 at 1000 a million.
	if status, body := a.admin(t, "PATCH", "/admin/v1/accounts/"+acct, `{"budget":{"amount":"0.5","period":"month"}}`); status != 200 {
		t.Fatalf("setting a budget: %d %s", status, body)
	}
	chat := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Hello!"}]}`
	for i := range 2 {
		if status, body := a.call(t, "POST", "/chat/completions", a.APIKey, chat); status != 200 {
			t.Fatalf("request %d: %d %s", i+1, status, body)
		}
	}
	status, body := a.call(t, "POST", "/chat/completions", a.APIKey, chat)
	if status != 429 || !strings.Contains(string(body), `"code": "insufficient_quota"`) && !strings.Contains(string(body), `"code":"insufficient_quota"`) {
		t.Fatalf("over budget: %d %s", status, body)
	}
	spec.ValidateT(t, "ErrorResponse", body)

	var usage struct {
		Data []struct {
			Requests    int64  `json:"requests"`
			TotalTokens int64  `json:"total_tokens"`
			Cost        string `json:"cost"`
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, body := a.admin(t, "GET", "/admin/v1/usage?by=model&account_id="+acct, "")
		if err := json.Unmarshal(body, &usage); err != nil {
			t.Fatal(err)
		}
		if len(usage.Data) == 1 && usage.Data[0].Requests == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("usage: %s", body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if u := usage.Data[0]; u.TotalTokens != 770 || u.Cost != "0.77" {
		t.Errorf("usage = %+v, want 770 tokens costing 0.77", u)
	}
}
