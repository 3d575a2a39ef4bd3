package api

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"modelgate/translate"
)

// A chat request's text is found by part, in order: content strings and
// text parts; tool calls' arguments, images and thinking are not text.
func TestChatTexts(t *testing.T) {
	r, err := ParseChatRequest([]byte(`{"model":"m","messages":[
		{"role":"system","content":"be brief"},
		{"role":"developer","content":[{"type":"text","text":"rules"}]},
		{"role":"user","content":[{"type":"text","text":"look"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}]},
		{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"secret\":1}"}}]},
		{"role":"tool","tool_call_id":"c1","content":"result"},
		{"role":"assistant","content":"earlier answer"},
		{"role":"user","content":"again"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	want := []translate.RequestText{
		{Part: translate.PartSystem, Text: "be brief"},
		{Part: translate.PartSystem, Text: "rules"},
		{Part: translate.PartUser, Text: "look"},
		{Part: translate.PartToolResult, Text: "result"},
		{Part: translate.PartAssistant, Text: "earlier answer"},
		{Part: translate.PartUser, Text: "again"},
	}
	if d := cmp.Diff(want, ChatTexts(r)); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

// A Messages request's text is found by part, in order: the system, text
// blocks by role, tool results; tool_use inputs, thinking and images are
// not text.
func TestMessagesTexts(t *testing.T) {
	r, err := ParseMessagesRequest([]byte(`{"model":"m","max_tokens":10,
		"system":[{"type":"text","text":"be brief","cache_control":{"type":"ephemeral"}}],
		"messages":[
		{"role":"user","content":"look"},
		{"role":"assistant","content":[{"type":"thinking","thinking":"hmm","signature":"sig"},{"type":"text","text":"earlier answer"},
			{"type":"tool_use","id":"t1","name":"f","input":{"secret":1}}]},
		{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"result"}]},
			{"type":"tool_result","tool_use_id":"t2","content":"plain result"},
			{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAAA"}},{"type":"text","text":"again"}]}]}`), false)
	if err != nil {
		t.Fatal(err)
	}
	want := []translate.RequestText{
		{Part: translate.PartSystem, Text: "be brief"},
		{Part: translate.PartUser, Text: "look"},
		{Part: translate.PartAssistant, Text: "earlier answer"},
		{Part: translate.PartToolResult, Text: "result"},
		{Part: translate.PartToolResult, Text: "plain result"},
		{Part: translate.PartUser, Text: "again"},
	}
	if d := cmp.Diff(want, MessagesTexts(r)); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

// Texts of any parsed request never fail: what does not decode is left
// out.
func FuzzRequestTexts(f *testing.F) {
	f.Add([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
	f.Add([]byte(`{"model":"m","max_tokens":1,"system":"s","messages":[{"role":"user","content":[{"type":"tool_result","content":[{"type":"text","text":"x"}]}]}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		if r, err := ParseChatRequest(body); err == nil {
			for _, x := range ChatTexts(r) {
				if x.Text == "" {
					t.Fatal("an empty text")
				}
			}
		}
		if r, err := ParseMessagesRequest(body, false); err == nil {
			for _, x := range MessagesTexts(r) {
				if x.Text == "" {
					t.Fatal("an empty text")
				}
			}
		}
	})
}
