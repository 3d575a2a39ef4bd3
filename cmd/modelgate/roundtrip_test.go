package main

import (
	"context"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"

	"modelgate/translate/api/spec"
)

// A full tool-call round trip through `modelgate dev` for the native
// providers: the model calls tools, the client answers them, and the model
// continues from the recorded next turn.
func TestDevToolRoundTrips(t *testing.T) {
	a := startDev(t, func(string) string { return "" })
	rec := &recorder{}
	c := client(a, a.APIKey, rec)
	ctx := context.Background()

	for _, model := range []string{"claude-tools", "vertex-claude-tools"} {
		t.Run(model+", JSON", func(t *testing.T) { anthropicRoundTrip(t, a, c, rec, model, false) })
		t.Run(model+", streamed", func(t *testing.T) { anthropicRoundTrip(t, a, c, rec, model, true) })
	}
	for _, tt := range []struct{ model, firstCall, secondCall, finalText string }{
		{"gemini-tools", "get_capital", "get_temperature", ""},
		{"vertex-gemini-tools", "get_capital", "get_temperature", ""},
		{"nova-tools", "get_temperature", "", "Paris"},
	} {
		t.Run(tt.model+", JSON", func(t *testing.T) {
			p := chatParams(tt.model)
			first, err := c.Chat.Completions.New(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			spec.ValidateT(t, "CreateChatCompletionResponse", rec.last())
			calls := first.Choices[0].Message.ToolCalls
			if len(calls) != 1 || calls[0].Function.Name != tt.firstCall || first.Choices[0].FinishReason != "tool_calls" {
				t.Fatalf("first turn = %+v", first.Choices[0])
			}
			p.Messages = append(p.Messages, first.Choices[0].Message.ToParam(), openai.ToolMessage("France / 21C", calls[0].ID))
			second, err := c.Chat.Completions.New(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			spec.ValidateT(t, "CreateChatCompletionResponse", rec.last())
			msg := second.Choices[0].Message
			if tt.secondCall != "" && (len(msg.ToolCalls) != 1 || msg.ToolCalls[0].Function.Name != tt.secondCall) {
				t.Errorf("second turn = %+v, want a call to %s", msg, tt.secondCall)
			}
			if tt.finalText != "" && !strings.Contains(msg.Content, tt.finalText) {
				t.Errorf("second turn content = %q", msg.Content)
			}
		})
	}
	for _, model := range []string{"gpt-roundtrip", "azure-roundtrip", "mistral-roundtrip", "command-r-tools"} {
		t.Run(model+", JSON", func(t *testing.T) {
			p := chatParams(model)
			first, err := c.Chat.Completions.New(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			calls := first.Choices[0].Message.ToolCalls
			if len(calls) != 1 || calls[0].Function.Name != "get_user_country" {
				t.Fatalf("first turn = %+v", first.Choices[0].Message)
			}
			p.Messages = append(p.Messages, first.Choices[0].Message.ToParam(), openai.ToolMessage("Mexico", calls[0].ID))
			second, err := c.Chat.Completions.New(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			spec.ValidateT(t, "CreateChatCompletionResponse", rec.last())
			// The recorded second turn calls the agent's final_result tool.
			if tc := second.Choices[0].Message.ToolCalls; len(tc) != 1 || tc[0].Function.Name != "final_result" ||
				tc[0].Function.Arguments != `{"city": "Mexico City", "country": "Mexico"}` {
				t.Errorf("second turn = %+v", second.Choices[0].Message)
			}
		})
	}
	for _, tt := range []struct{ name, model, secondCall, finalText string }{
		{"bedrock, streamed", "nova-tools", "", "Paris"},
		{"gemini, streamed", "gemini-tools", "get_temperature", ""},
		{"vertex gemini, streamed", "vertex-gemini-tools", "get_temperature", ""},
		{"openai, streamed", "gpt-roundtrip", "", "capital"},
		{"azure, streamed", "azure-roundtrip", "", "capital"},
		{"mistral, streamed", "mistral-roundtrip", "", "capital"},
		{"cohere, streamed", "command-r-tools", "final_result", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := chatParams(tt.model)
			p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
			first := accumulate(t, c, p)
			spec.ValidateSSE(t, "CreateChatCompletionStreamResponse", rec.last())
			calls := first.Choices[0].Message.ToolCalls
			if len(calls) == 0 {
				t.Fatal("no tool call in the first turn")
			}
			p.Messages = append(p.Messages, first.Choices[0].Message.ToParam(), openai.ToolMessage("21C and sunny", calls[0].ID))
			second := accumulate(t, c, p)
			spec.ValidateSSE(t, "CreateChatCompletionStreamResponse", rec.last())
			msg := second.Choices[0].Message
			if tt.secondCall != "" && (len(msg.ToolCalls) != 1 || msg.ToolCalls[0].Function.Name != tt.secondCall) {
				t.Errorf("second turn = %+v, want a call to %s", msg, tt.secondCall)
			}
			if tt.finalText != "" && !strings.Contains(msg.Content, tt.finalText) {
				t.Errorf("second turn content = %q, want %q in it", msg.Content, tt.finalText)
			}
			if second.Usage.TotalTokens == 0 {
				t.Error("no usage on the second turn")
			}
		})
	}
}

func anthropicRoundTrip(t *testing.T, a devAddrs, c openai.Client, rec *recorder, model string, streamed bool) {
	t.Helper()
	ctx := context.Background()
	p := chatParams(model)
	var first *openai.ChatCompletion
	if streamed {
		p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
		acc := accumulate(t, c, p)
		spec.ValidateSSE(t, "CreateChatCompletionStreamResponse", rec.last())
		first = &acc.ChatCompletion
	} else {
		var err error
		if first, err = c.Chat.Completions.New(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	calls := first.Choices[0].Message.ToolCalls
	if len(calls) != 4 {
		t.Fatalf("tool calls = %d", len(calls))
	}
	p.Messages = append(p.Messages, first.Choices[0].Message.ToParam())
	for _, tc := range calls {
		p.Messages = append(p.Messages, openai.ToolMessage("info about "+tc.Function.Arguments, tc.ID))
	}
	p.StreamOptions = openai.ChatCompletionStreamOptionsParam{}
	second, err := c.Chat.Completions.New(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	spec.ValidateT(t, "CreateChatCompletionResponse", rec.last())
	if !strings.Contains(second.Choices[0].Message.Content, "Daisy is the youngest") || second.Choices[0].FinishReason != "stop" {
		t.Errorf("final answer = %q (%s)", second.Choices[0].Message.Content, second.Choices[0].FinishReason)
	}
	sent := a.Mock.Requests()
	last := string(sent[len(sent)-1].Body)
	if strings.Count(last, `"type":"tool_result"`) != 4 || !strings.Contains(last, `"tool_use_id":"`+calls[0].ID+`"`) {
		t.Errorf("the tool results did not reach Anthropic as tool_result blocks: %s", last)
	}
}

func accumulate(t *testing.T, c openai.Client, p openai.ChatCompletionNewParams) openai.ChatCompletionAccumulator {
	t.Helper()
	s := c.Chat.Completions.NewStreaming(context.Background(), p)
	acc := openai.ChatCompletionAccumulator{}
	for s.Next() {
		acc.AddChunk(s.Current())
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	return acc
}
