package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"modelgate/translate/api/spec"
)

// otherAccountKey creates an account beside dev's through the admin API
// and returns a key of it limited to models (none: all).
func otherAccountKey(t *testing.T, a devAddrs, name string, models ...string) string {
	t.Helper()
	acctBody, _ := json.Marshal(map[string]string{"name": name})
	status, body := a.admin(t, "POST", "/admin/v1/accounts", string(acctBody))
	var acct struct{ ID string }
	if err := json.Unmarshal(body, &acct); err != nil || status != http.StatusCreated {
		t.Fatalf("creating an account: %d %s", status, body)
	}
	m, _ := json.Marshal(map[string]any{"name": name, "models": models})
	status, body = a.admin(t, "POST", "/admin/v1/accounts/"+acct.ID+"/keys", string(m))
	var key struct{ Secret string }
	if err := json.Unmarshal(body, &key); err != nil || status != http.StatusCreated || key.Secret == "" {
		t.Fatalf("creating a key: %d %s", status, body)
	}
	return key.Secret
}

// checkRequestID fails unless the raw answer carries an x-request-id.
func checkRequestID(t *testing.T, what string, raw *http.Response) {
	t.Helper()
	if raw == nil || raw.Header.Get("X-Request-Id") == "" {
		t.Errorf("%s: no x-request-id in the answer", what)
	}
}

// notFound checks err is the SDK's 404 with code and param.
func notFound(t *testing.T, what string, err error, code, param string) {
	t.Helper()
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 || apiErr.Type != "invalid_request_error" || apiErr.Code != code || apiErr.Param != param {
		t.Errorf("%s: error = %v, want 404 invalid_request_error %s (param %q)", what, err, code, param)
		return
	}
	checkRequestID(t, what, apiErr.Response)
}

// What the official SDKs call beside creating: retrieving a model, and
// retrieving, listing the input items of and deleting a stored response,
// through `modelgate dev` with openai-go; every answer has x-request-id.
func TestSDKRetrieve(t *testing.T) {
	a := startDev(t, func(string) string { return "" })
	rec := &recorder{}
	c := client(a, a.APIKey, rec)
	ctx := context.Background()

	t.Run("models", func(t *testing.T) {
		page, err := c.Models.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var raw *http.Response
		m, err := c.Models.Get(ctx, "claude-sonnet", option.WithResponseInto(&raw))
		if err != nil {
			t.Fatal(err)
		}
		spec.ValidateT(t, "Model", rec.last())
		checkRequestID(t, "models.get", raw)
		var listed *openai.Model
		for i := range page.Data {
			if page.Data[i].ID == "claude-sonnet" {
				listed = &page.Data[i]
			}
		}
		if listed == nil || m.ID != listed.ID || m.Created != listed.Created || m.OwnedBy != listed.OwnedBy || m.Object != "model" || m.Created == 0 {
			t.Errorf("models.get = %+v, want the list's entry %+v", m, listed)
		}
		_, err = c.Models.Get(ctx, "no-such-model")
		notFound(t, "unknown model", err, "model_not_found", "model")
		limited := client(a, otherAccountKey(t, a, "limited", "claude-sonnet"), rec)
		if _, err := limited.Models.Get(ctx, "claude-sonnet"); err != nil {
			t.Errorf("a model the key may use: %v", err)
		}
		_, err = limited.Models.Get(ctx, "gpt-4o-mini")
		notFound(t, "a model the key may not use", err, "model_not_found", "model")
	})

	other := client(a, otherAccountKey(t, a, "other"), rec)
	for _, tt := range []struct {
		model  string
		stream bool
	}{{"claude-sonnet", false}, {"gpt-4o-mini", false}, {"gemini-flash", true}} {
		name := tt.model
		if tt.stream {
			name += " stream"
		}
		t.Run(name, func(t *testing.T) {
			first := respond(t, c, rec, responseParams(tt.model, "My name is Ada."), tt.stream)
			p := responseParams(tt.model, "What is my name?")
			p.PreviousResponseID = openai.String(first.ID)
			var raw *http.Response
			var created *responses.Response
			if tt.stream {
				created = respond(t, c, rec, p, true)
			} else {
				var err error
				if created, err = c.Responses.New(ctx, p, option.WithResponseInto(&raw)); err != nil {
					t.Fatal(err)
				}
				checkRequestID(t, "responses.new", raw)
			}

			got, err := c.Responses.Get(ctx, created.ID, responses.ResponseGetParams{}, option.WithResponseInto(&raw))
			if err != nil {
				t.Fatal(err)
			}
			spec.ValidateT(t, "Response", rec.last())
			checkRequestID(t, "responses.get", raw)
			if got.ID != created.ID || got.Status != "completed" || got.OutputText() != created.OutputText() || got.OutputText() == "" ||
				got.Usage.TotalTokens != created.Usage.TotalTokens || got.PreviousResponseID != first.ID || got.Model != created.Model {
				t.Errorf("responses.get = %s\nwant %s", got.RawJSON(), created.RawJSON())
			}
			if !tt.stream && got.RawJSON() != created.RawJSON() {
				t.Errorf("responses.get differs from what responses.new returned:\n%s\n%s", got.RawJSON(), created.RawJSON())
			}

			// The input items: the first turn's input and output, then this
			// turn's input; newest first by default.
			items, err := c.Responses.InputItems.List(ctx, created.ID, responses.InputItemListParams{}, option.WithResponseInto(&raw))
			if err != nil {
				t.Fatal(err)
			}
			spec.ValidateT(t, "ResponseItemList", rec.last())
			checkRequestID(t, "responses.inputItems.list", raw)
			n := 1 + len(first.Output) + 1
			if len(items.Data) != n || items.HasMore {
				t.Fatalf("%d input items (has_more %v), want %d: %s", len(items.Data), items.HasMore, n, items.RawJSON())
			}
			var list struct {
				FirstID string `json:"first_id"`
				LastID  string `json:"last_id"`
			}
			json.Unmarshal([]byte(items.RawJSON()), &list)
			newest, oldest := items.Data[0].AsMessage(), items.Data[n-1].AsMessage()
			if newest.Role != "user" || len(newest.Content) != 1 || newest.Content[0].Text != "What is my name?" ||
				oldest.Role != "user" || oldest.Content[0].Text != "My name is Ada." || list.FirstID != newest.ID || list.LastID != oldest.ID {
				t.Errorf("input items = %s", items.RawJSON())
			}
			if out := items.Data[1].AsOutputMessage(); out.ID != first.Output[len(first.Output)-1].ID || out.Role != "assistant" {
				t.Errorf("second newest input item = %s, want the first response's output %s", items.Data[1].RawJSON(), first.RawJSON())
			}
			// One at a time, oldest first, with the cursor.
			var ids []string
			params := responses.InputItemListParams{Limit: openai.Int(1), Order: responses.InputItemListParamsOrderAsc}
			for page, err := c.Responses.InputItems.List(ctx, created.ID, params); ; page, err = page.GetNextPage() {
				if err != nil {
					t.Fatal(err)
				}
				if page == nil {
					break
				}
				for _, it := range page.Data {
					ids = append(ids, it.ID)
				}
				if len(ids) > n {
					t.Fatal("paging does not end")
				}
			}
			if len(ids) != n || ids[0] != list.LastID || ids[n-1] != list.FirstID {
				t.Errorf("paged ids %v, want the %d of %s oldest first", ids, n, items.RawJSON())
			}

			// Another account sees nothing and deletes nothing.
			_, err = other.Responses.Get(ctx, created.ID, responses.ResponseGetParams{})
			notFound(t, "another account's get", err, "not_found", "")
			_, err = other.Responses.InputItems.List(ctx, created.ID, responses.InputItemListParams{})
			notFound(t, "another account's input items", err, "not_found", "")
			notFound(t, "another account's delete", other.Responses.Delete(ctx, created.ID), "not_found", "")

			// openai-go reads no body from a delete: ask it for the body.
			var deleted struct {
				ID      string `json:"id"`
				Object  string `json:"object"`
				Deleted bool   `json:"deleted"`
			}
			if err := c.Responses.Delete(ctx, created.ID, option.WithResponseInto(&raw), option.WithResponseBodyInto(&deleted)); err != nil {
				t.Fatal(err)
			}
			checkRequestID(t, "responses.delete", raw)
			if deleted.ID != created.ID || deleted.Object != "response" || !deleted.Deleted {
				t.Errorf("delete answered %+v", deleted)
			}
			_, err = c.Responses.Get(ctx, created.ID, responses.ResponseGetParams{})
			notFound(t, "get after delete", err, "not_found", "")
			_, err = c.Responses.InputItems.List(ctx, created.ID, responses.InputItemListParams{})
			notFound(t, "input items after delete", err, "not_found", "")
			p = responseParams(tt.model, "Still there?")
			p.PreviousResponseID = openai.String(created.ID)
			_, err = c.Responses.New(ctx, p)
			notFound(t, "continuing after delete", err, "previous_response_not_found", "previous_response_id")
			// The earlier turn is untouched.
			if _, err := c.Responses.Get(ctx, first.ID, responses.ResponseGetParams{}); err != nil {
				t.Errorf("the first turn after deleting the second: %v", err)
			}
		})
	}
}

// The same calls with the official Node SDK (testdata/nodesdk/retrieve.mjs):
// a retrieve after delete must throw its NotFoundError.
func TestNodeSDKRetrieve(t *testing.T) {
	node, dir := nodeSDK(t)
	a := startDev(t, func(string) string { return "" })
	for _, model := range []string{"claude-sonnet", "gpt-4o-mini"} {
		t.Run(model, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, node, "retrieve.mjs", model)
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "MODELGATE_BASE_URL="+a.Gateway, "MODELGATE_API_KEY="+a.APIKey)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("node: %v\n%s", err, stderr.Bytes())
			}
			var got struct {
				Model              struct{ ID, Object, OwnedBy string }
				Created, Retrieved struct{ ID, Status, Text string }
				InputItems         []struct{ ID, Type, Role, Text string }
				FirstID, LastID    string
				HasMore            bool
				NotFound           struct {
					Status           int
					Name, Type, Code string
				}
				RequestIDs map[string]string
			}
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatalf("node printed %q: %v", out, err)
			}
			if got.Model.ID != model || got.Model.Object != "model" || got.Model.OwnedBy == "" {
				t.Errorf("models.retrieve = %+v", got.Model)
			}
			if got.Created.ID == "" || got.Retrieved != got.Created || got.Retrieved.Status != "completed" || got.Retrieved.Text == "" {
				t.Errorf("responses.retrieve = %+v, responses.create = %+v", got.Retrieved, got.Created)
			}
			if len(got.InputItems) != 1 || got.InputItems[0].Type != "message" || got.InputItems[0].Role != "user" ||
				got.InputItems[0].Text != "Hello!" || got.FirstID != got.InputItems[0].ID || got.LastID != got.InputItems[0].ID || got.HasMore {
				t.Errorf("responses.inputItems.list = %+v first %q last %q more %v", got.InputItems, got.FirstID, got.LastID, got.HasMore)
			}
			if got.NotFound.Name != "NotFoundError" || got.NotFound.Status != 404 || got.NotFound.Type != "invalid_request_error" || got.NotFound.Code != "not_found" {
				t.Errorf("retrieve after delete threw %+v, want a NotFoundError", got.NotFound)
			}
			for _, call := range []string{"models.retrieve", "responses.create", "responses.retrieve", "responses.inputItems.list", "responses.delete", "retrieve after delete"} {
				if got.RequestIDs[call] == "" {
					t.Errorf("%s: no x-request-id (%v)", call, got.RequestIDs)
				}
			}
		})
	}
}
