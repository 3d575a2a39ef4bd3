package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"modelgate/cmd/mockprovider/replay"
	"modelgate/translate/api/spec"
	"modelgate/translate/sse"
)

func responseParams(model, input string) responses.ResponseNewParams {
	return responses.ResponseNewParams{Model: model, Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(input)}}
}

// The Responses API through `modelgate dev`, bridged for most providers and
// passed through for OpenAI and Azure OpenAI, with openai-go as the client.
func TestDevResponses(t *testing.T) {
	a := startDev(t, func(string) string { return "" })
	rec := &recorder{}
	c := client(a, a.APIKey, rec)
	ctx := context.Background()

	for _, model := range []string{"claude-sonnet", "gemini-flash", "nova-micro", "command-r", "gpt-4o-mini", "azure-gpt"} {
		t.Run(model+" JSON", func(t *testing.T) {
			resp, err := c.Responses.New(ctx, responseParams(model, "Hello!"))
			if err != nil {
				t.Fatal(err)
			}
			spec.ValidateT(t, "Response", rec.last())
			if resp.Status != "completed" || resp.OutputText() == "" || resp.Usage.TotalTokens == 0 || !strings.HasPrefix(resp.ID, "resp_") {
				t.Errorf("response = %s %q usage %+v", resp.Status, resp.OutputText(), resp.Usage)
			}
		})
		t.Run(model+" stream", func(t *testing.T) {
			s := c.Responses.NewStreaming(ctx, responseParams(model, "Hello!"))
			var acc responses.ResponseAccumulator
			for s.Next() {
				var ev responses.ResponsesServerEventUnion
				if err := json.Unmarshal([]byte(s.Current().RawJSON()), &ev); err != nil {
					t.Fatal(err)
				}
				if err := acc.AddEvent(ev); err != nil {
					t.Fatalf("accumulating: %v", err)
				}
			}
			if err := s.Err(); err != nil {
				t.Fatal(err)
			}
			checkResponseEvents(t, rec.last())
			final, err := acc.ReconstructedResponse()
			if err != nil {
				t.Fatal(err)
			}
			if final.OutputText() == "" || final.Status != "completed" || final.Usage.TotalTokens == 0 {
				t.Errorf("accumulated response: status %s, text %q, usage %+v", final.Status, final.OutputText(), final.Usage)
			}
		})
	}

	t.Run("three turns with previous_response_id", func(t *testing.T) {
		first, err := c.Responses.New(ctx, responseParams("claude-sonnet", "My name is Ada."))
		if err != nil {
			t.Fatal(err)
		}
		p := responseParams("claude-sonnet", "What did I say?")
		p.PreviousResponseID = openai.String(first.ID)
		second, err := c.Responses.New(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		p = responseParams("claude-sonnet", "And once more?")
		p.PreviousResponseID = openai.String(second.ID)
		if _, err := c.Responses.New(ctx, p); err != nil {
			t.Fatal(err)
		}
		reqs := a.Mock.Requests()
		third := string(reqs[len(reqs)-1].Body)
		for _, want := range []string{"My name is Ada.", first.OutputText(), "What did I say?", second.OutputText(), "And once more?"} {
			if !strings.Contains(third, jsonText(want)) {
				t.Errorf("turn three's upstream request lacks %q:\n%s", want, third)
			}
		}
		p.PreviousResponseID = openai.String("resp_unknown")
		_, err = c.Responses.New(ctx, p)
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 || apiErr.Param != "previous_response_id" {
			t.Errorf("unknown previous_response_id: %v", err)
		}
	})
	t.Run("continuation across providers", func(t *testing.T) {
		first, err := c.Responses.New(ctx, responseParams("claude-sonnet", "My name is Ada."))
		if err != nil {
			t.Fatal(err)
		}
		// OpenAI gets the stored conversation inlined: it cannot know an id
		// the gateway made for a response Anthropic gave.
		p := responseParams("gpt-4o-mini", "What did I say?")
		p.PreviousResponseID = openai.String(first.ID)
		second, err := c.Responses.New(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if second.PreviousResponseID != first.ID {
			t.Errorf("previous_response_id echoed as %q", second.PreviousResponseID)
		}
		p = responseParams("azure-gpt", "And once more?")
		p.PreviousResponseID = openai.String(second.ID)
		if _, err := c.Responses.New(ctx, p); err != nil {
			t.Fatal(err)
		}
		reqs := a.Mock.Requests()
		openaiReq, azureReq := reqs[len(reqs)-2], reqs[len(reqs)-1]
		if openaiReq.Path != "/v1/responses" || azureReq.Path != "/openai/v1/responses" || azureReq.Header.Get("Api-Key") == "" {
			t.Errorf("upstream requests: %s, %s %v", openaiReq.Path, azureReq.Path, azureReq.Header)
		}
		for _, want := range []string{"My name is Ada.", first.OutputText(), "What did I say?", second.OutputText(), "And once more?"} {
			if !strings.Contains(string(azureReq.Body), jsonText(want)) {
				t.Errorf("turn three's upstream request lacks %q:\n%s", want, azureReq.Body)
			}
		}
		for _, r := range []replay.Request{openaiReq, azureReq} {
			if strings.Contains(string(r.Body), "previous_response_id") || strings.Contains(string(r.Body), a.APIKey) {
				t.Errorf("upstream request carries previous_response_id or the client's key: %s", r.Body)
			}
		}
	})
	t.Run("missing input", func(t *testing.T) {
		_, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: "claude-sonnet"})
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != "input" || apiErr.Code != "missing_required_parameter" {
			t.Errorf("error = %v", err)
		}
	})
}

func jsonText(s string) string {
	b, _ := json.Marshal(s)
	return strings.Trim(string(b), `"`)
}

// checkResponseEvents validates every event and the contiguous sequence
// numbers from 0.
func checkResponseEvents(t *testing.T, stream []byte) {
	t.Helper()
	var dec sse.Decoder
	for i, ev := range dec.Feed(stream) {
		spec.ValidateT(t, "ResponseStreamEvent", ev.Data)
		var m struct {
			Type string `json:"type"`
			Seq  int    `json:"sequence_number"`
		}
		json.Unmarshal(ev.Data, &m)
		if m.Seq != i || m.Type != ev.Type {
			t.Errorf("event %d: %s seq %d", i, m.Type, m.Seq)
		}
	}
}

// Function tools round-trip through function_call and function_call_output
// items, with the conversation kept by the gateway.
func TestDevResponsesFunctionTools(t *testing.T) {
	a := startDev(t, func(string) string { return "" })
	rec := &recorder{}
	c := client(a, a.APIKey, rec)
	tool := responses.ToolUnionParam{OfFunction: &responses.FunctionToolParam{Name: "get_temperature",
		Parameters: map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}}}
	for _, tt := range []struct {
		model  string
		stream bool
	}{{"claude-tools", false}, {"nova-tools", true}, {"gemini-tools", true}, {"gpt-roundtrip", false}, {"azure-roundtrip", true}} {
		t.Run(tt.model, func(t *testing.T) {
			p := responseParams(tt.model, "What's the weather?")
			p.Tools = []responses.ToolUnionParam{tool}
			first := respond(t, c, rec, p, tt.stream)
			var call responses.ResponseFunctionToolCall
			for _, item := range first.Output {
				if item.Type == "function_call" {
					call = item.AsFunctionCall()
					break
				}
			}
			if call.CallID == "" || call.Name == "" {
				t.Fatalf("no function_call in %s", first.RawJSON())
			}
			output := responses.ResponseInputItemParamOfFunctionCallOutput("21C and sunny")
			output.OfFunctionCallOutput.CallID = openai.String(call.CallID)
			next := responses.ResponseNewParams{Model: tt.model, PreviousResponseID: openai.String(first.ID), Tools: p.Tools,
				Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{output}}}
			second := respond(t, c, rec, next, tt.stream)
			if second.Status != "completed" || len(second.Output) == 0 {
				t.Errorf("second turn = %s", second.RawJSON())
			}
			reqs := a.Mock.Requests()
			last := string(reqs[len(reqs)-1].Body)
			if !strings.Contains(last, "21C and sunny") || !strings.Contains(last, call.Name) {
				t.Errorf("the function call and its output did not reach the provider: %s", last)
			}
		})
	}
}

// respond makes one Responses call, streamed or not, and returns the final
// Response; every body and event is validated.
func respond(t *testing.T, c openai.Client, rec *recorder, p responses.ResponseNewParams, stream bool) *responses.Response {
	t.Helper()
	ctx := context.Background()
	if !stream {
		r, err := c.Responses.New(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		spec.ValidateT(t, "Response", rec.last())
		return r
	}
	s := c.Responses.NewStreaming(ctx, p)
	var acc responses.ResponseAccumulator
	for s.Next() {
		var ev responses.ResponsesServerEventUnion
		if err := json.Unmarshal([]byte(s.Current().RawJSON()), &ev); err != nil {
			t.Fatal(err)
		}
		if err := acc.AddEvent(ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	checkResponseEvents(t, rec.last())
	r, err := acc.ReconstructedResponse()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// codexTools are the tool types Codex offers by default: a function, a
// freeform tool, a namespace of MCP tools and tools OpenAI runs itself.
var codexTools = []any{
	map[string]any{"type": "function", "name": "exec_command", "description": "Runs a shell command.",
		"parameters": map[string]any{"type": "object", "properties": map[string]any{"cmd": map[string]any{"type": "string"}}}},
	map[string]any{"type": "custom", "name": "apply_patch", "description": "Edits files.",
		"format": map[string]any{"type": "grammar", "syntax": "lark", "definition": "start: begin_patch hunk+ end_patch"}},
	map[string]any{"type": "namespace", "name": "mcp__github__", "description": "GitHub.", "tools": []any{
		map[string]any{"type": "function", "name": "get_issue", "parameters": map[string]any{"type": "object"}}}},
	map[string]any{"type": "web_search"},
}

// A bridged model is offered every client tool, and the client is told
// which tools (those OpenAI runs) it was not offered, rather than refused:
// Codex's default request on Anthropic, Bedrock and Gemini models.
func TestDevResponsesEveryToolType(t *testing.T) {
	a := startDev(t, func(string) string { return "" })
	rec := &recorder{}
	c := client(a, a.APIKey, rec)
	for _, model := range []string{"claude-tools", "nova-tools", "gemini-tools"} {
		t.Run(model, func(t *testing.T) {
			var head *http.Response
			resp, err := c.Responses.New(context.Background(), responseParams(model, "Fix the crash."),
				option.WithJSONSet("tools", codexTools), option.WithResponseInto(&head))
			if err != nil {
				t.Fatal(err)
			}
			spec.ValidateT(t, "Response", rec.last())
			if w := head.Header.Get("x-modelgate-warning"); !strings.Contains(w, "web_search") { // not enabled for the model
				t.Errorf("warning %q, want web_search named", w)
			}
			if len(resp.Output) == 0 {
				t.Errorf("no output: %s", resp.RawJSON())
			}
			reqs := a.Mock.Requests()
			sent := string(reqs[len(reqs)-1].Body)
			for _, name := range []string{"exec_command", "apply_patch", "mcp__github__get_issue", "lark grammar"} {
				if !strings.Contains(sent, name) {
					t.Errorf("the provider was not offered %s: %s", name, sent)
				}
			}
			if strings.Contains(sent, "web_search") {
				t.Errorf("the provider was offered web_search: %s", sent)
			}
		})
	}
}

// The Responses API's WebSocket mode (Codex tries it first) is refused
// with a 426 and an OpenAI error at the handshake, on which Codex falls
// back to HTTP at once; a key is not needed to learn that.
func TestDevWebSocketUpgradeRefused(t *testing.T) {
	a := startDev(t, func(string) string { return "" })
	for _, key := range []string{a.APIKey, ""} {
		req, _ := http.NewRequest(http.MethodGet, a.Gateway+"/responses", nil)
		for k, v := range map[string]string{"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
			"Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==", "OpenAI-Beta": "responses_websockets=2026-02-06"} {
			req.Header.Set(k, v)
		}
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var e struct {
			Error struct{ Type, Code, Message string }
		}
		if resp.StatusCode != http.StatusUpgradeRequired || json.Unmarshal(body, &e) != nil || e.Error.Code != "upgrade_not_supported" ||
			e.Error.Type != "invalid_request_error" || !strings.Contains(e.Error.Message, "POST /v1/responses") {
			t.Errorf("key %t: %d %s", key != "", resp.StatusCode, body)
		}
		spec.ValidateT(t, "ErrorResponse", body)
	}
}

// POST /v1/responses/compact on providers without the endpoint, with
// openai-go: the conversation's user messages and one compaction item,
// whose summary the next request (on another provider too) continues from.
func TestDevResponsesCompact(t *testing.T) {
	a := startDev(t, func(string) string { return "" })
	rec := &recorder{}
	c := client(a, a.APIKey, rec)
	ctx := context.Background()
	for _, model := range []string{"claude-sonnet", "gemini-flash", "nova-micro"} {
		t.Run(model, func(t *testing.T) {
			first, err := c.Responses.New(ctx, responseParams(model, "Create a landing page for a dog café."))
			if err != nil {
				t.Fatal(err)
			}
			compacted, err := c.Responses.Compact(ctx, responses.ResponseCompactParams{Model: responses.ResponseCompactParamsModel(model),
				PreviousResponseID: openai.String(first.ID)})
			if err != nil {
				t.Fatal(err)
			}
			spec.ValidateT(t, "CompactResource", rec.last())
			out := compacted.Output
			if len(out) != 2 || out[0].Type != "message" || out[1].Type != "compaction" || compacted.Usage.TotalTokens == 0 {
				t.Fatalf("compacted %s", compacted.RawJSON())
			}
			reqs := a.Mock.Requests()
			if asked := string(reqs[len(reqs)-1].Body); !strings.Contains(asked, "context checkpoint compaction") || !strings.Contains(asked, "dog café") {
				t.Errorf("the provider was not asked for a summary of the conversation: %s", asked)
			}
			var input []any
			json.Unmarshal([]byte(compacted.RawJSON()), &struct{ Output *[]any }{&input})
			input = append(input, map[string]any{"role": "user", "content": "Go on."})
			for _, next := range []string{model, "claude-sonnet"} {
				if _, err := c.Responses.New(ctx, responseParams(next, ""), option.WithJSONSet("input", input)); err != nil {
					t.Fatalf("continuing on %s: %v", next, err)
				}
				reqs = a.Mock.Requests()
				if sent := string(reqs[len(reqs)-1].Body); !strings.Contains(sent, "Summary of the earlier conversation") || !strings.Contains(sent, "Go on.") {
					t.Errorf("continuing on %s did not replay the summary: %s", next, sent)
				}
			}
		})
	}
}

// Codex's cache-affinity and session headers reach the provider as sent:
// dropping them cuts OpenAI's prompt cache hits.
func TestDevCodexHeadersReachTheProvider(t *testing.T) {
	a := startDev(t, func(string) string { return "" })
	c := client(a, a.APIKey, &recorder{})
	headers := map[string]string{"session_id": "0199a1b2-c3d4", "x-client-request-id": "0199a1b2-c3d4", "originator": "codex_cli_rs",
		"x-codex-turn-metadata": `{"turn":1}`, "x-codex-window-id": "w1"}
	var opts []option.RequestOption
	for k, v := range headers {
		opts = append(opts, option.WithHeader(k, v))
	}
	p := responseParams("gpt-4o-mini", "Hello!")
	p.PromptCacheKey = openai.String("0199a1b2-c3d4")
	if _, err := c.Responses.New(context.Background(), p, opts...); err != nil {
		t.Fatal(err)
	}
	reqs := a.Mock.Requests()
	got := reqs[len(reqs)-1]
	for k, v := range headers {
		if got.Header.Get(k) != v {
			t.Errorf("%s = %q, want %q", k, got.Header.Get(k), v)
		}
	}
	if !strings.Contains(string(got.Body), `"prompt_cache_key":"0199a1b2-c3d4"`) {
		t.Errorf("prompt_cache_key did not reach the provider: %s", got.Body)
	}
}
