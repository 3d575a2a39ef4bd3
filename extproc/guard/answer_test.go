package guard_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"modelgate/extproc/guard"
	"modelgate/translate"
	"modelgate/translate/api"
	"modelgate/translate/api/spec"
	"modelgate/translate/providers"
	"modelgate/translate/responses"
	"modelgate/translate/sse"
	"modelgate/translate/translatetest/clienttext"
)

// The answer the provider streams: long enough for windows to release
// text before the match, which is cut inside its é (a two-byte UTF-8
// sequence) by the provider's pieces and again by the chunks the gateway
// reads.
var (
	before = strings.Repeat("The quick brown fox jumps over the lazy dog. ", 10)
	match  = "zébra-42"
	after  = " and the rest of the answer."
	answer = before + match + after
	zebra  = regexp.MustCompile(`z[eé]bra-[0-9]+`)
)

// pieces are the answer's text as the provider streams it: seven
// characters at a time, so the match is cut between pieces.
func pieces(s string) []string {
	var out []string
	r := []rune(s)
	for len(r) > 0 {
		n := min(7, len(r))
		out = append(out, string(r[:n]))
		r = r[n:]
	}
	return out
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// openAIStream is an OpenAI chat completion stream of text, with usage.
func openAIStream(text string) []byte {
	var b strings.Builder
	chunk := func(delta, finish string) {
		fmt.Fprintf(&b, `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":%s,"finish_reason":%s}]}`+"\n\n", delta, finish)
	}
	chunk(`{"role":"assistant","content":""}`, "null")
	for _, p := range pieces(text) {
		chunk(`{"content":`+quote(p)+`}`, "null")
	}
	chunk(`{}`, `"stop"`)
	b.WriteString(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":120,"total_tokens":129}}` + "\n\n")
	b.WriteString("data: [DONE]\n\n")
	return []byte(b.String())
}

// anthropicStream is an Anthropic Messages stream of text.
func anthropicStream(text string) []byte {
	var b strings.Builder
	ev := func(typ, data string) { fmt.Fprintf(&b, "event: %s\ndata: %s\n\n", typ, data) }
	ev("message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":9,"output_tokens":1}}}`)
	ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)
	for _, p := range pieces(text) {
		ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":`+quote(p)+`}}`)
	}
	ev("content_block_stop", `{"type":"content_block_stop","index":0}`)
	ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":120}}`)
	ev("message_stop", `{"type":"message_stop"}`)
	return []byte(b.String())
}

const (
	openAIJSON    = `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":%s,"refusal":null},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":120,"total_tokens":129}}`
	anthropicJSON = `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":%s}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":9,"output_tokens":120}}`
)

// door is a front door on a provider: a translator of the client's
// request, and the provider's answer to it.
type door struct {
	name    string
	dialect translate.Dialect
	stream  bool
	newTr   func(t *testing.T) translate.Translator
	answer  func(text string) []byte
	ct      string
}

func doors() []door {
	target := translate.Target{Backend: "b", Model: "m", APIKey: "k"}
	openai, _ := providers.Lookup("openai")
	anthropic, _ := providers.Lookup("anthropic")
	chat := func(p providers.Provider, body string) func(t *testing.T) translate.Translator {
		return func(t *testing.T) translate.Translator {
			req, err := api.ParseChatRequest([]byte(body))
			if err != nil {
				t.Fatal(err)
			}
			return p.Chat(target, req)
		}
	}
	messages := func(p providers.Provider, body string) func(t *testing.T) translate.Translator {
		return func(t *testing.T) translate.Translator {
			req, err := api.ParseMessagesRequest([]byte(body), false)
			if err != nil {
				t.Fatal(err)
			}
			tr, err := p.MessagesTranslator(target, req)
			if err != nil {
				t.Fatal(err)
			}
			return tr
		}
	}
	resp := func(p providers.Provider, body string) func(t *testing.T) translate.Translator {
		return func(t *testing.T) translate.Translator {
			req, err := responses.ParseRequest([]byte(body))
			if err != nil {
				t.Fatal(err)
			}
			tr, err := p.ResponsesTranslator(target, req, nil, "resp_1", 1)
			if err != nil {
				t.Fatal(err)
			}
			return tr
		}
	}
	jsonOf := func(format string) func(string) []byte {
		return func(text string) []byte { return fmt.Appendf(nil, format, quote(text)) }
	}
	const (
		chatReq   = `{"model":"m","messages":[{"role":"user","content":"hi"}]%s}`
		msgReq    = `{"model":"m","max_tokens":500,"messages":[{"role":"user","content":"hi"}]%s}`
		respReq   = `{"model":"m","input":"hi"%s}`
		streaming = `,"stream":true`
		usage     = `,"stream":true,"stream_options":{"include_usage":true}`
	)
	sseCT, jsonCT := "text/event-stream", "application/json"
	return []door{
		{"chat on OpenAI, streamed", translate.Chat, true, chat(openai, fmt.Sprintf(chatReq, usage)), openAIStream, sseCT},
		{"chat on Anthropic, streamed", translate.Chat, true, chat(anthropic, fmt.Sprintf(chatReq, usage)), anthropicStream, sseCT},
		{"Messages on Anthropic, streamed", translate.Messages, true, messages(anthropic, fmt.Sprintf(msgReq, streaming)), anthropicStream, sseCT},
		{"Messages on OpenAI, streamed", translate.Messages, true, messages(openai, fmt.Sprintf(msgReq, streaming)), openAIStream, sseCT},
		{"Responses on Anthropic, streamed", translate.Responses, true, resp(anthropic, fmt.Sprintf(respReq, streaming)), anthropicStream, sseCT},
		{"chat on OpenAI", translate.Chat, false, chat(openai, fmt.Sprintf(chatReq, "")), jsonOf(openAIJSON), jsonCT},
		{"chat on Anthropic", translate.Chat, false, chat(anthropic, fmt.Sprintf(chatReq, "")), jsonOf(anthropicJSON), jsonCT},
		{"Messages on Anthropic", translate.Messages, false, messages(anthropic, fmt.Sprintf(msgReq, "")), jsonOf(anthropicJSON), jsonCT},
		{"Messages on OpenAI", translate.Messages, false, messages(openai, fmt.Sprintf(msgReq, "")), jsonOf(openAIJSON), jsonCT},
		{"Responses on Anthropic", translate.Responses, false, resp(anthropic, fmt.Sprintf(respReq, "")), jsonOf(anthropicJSON), jsonCT},
	}
}

// played is what the client got of an answer.
type played struct {
	out   []byte
	text  string // the generated text the guard reported it released
	first int    // the chunk whose reply first carried text; -1 for none
	chunk int    // the chunk the match began in
}

// play plays the provider's answer, cut in chunks of up to 9 bytes (one
// whole body when it is JSON), through a translator and g (nil: none).
func play(t *testing.T, d door, g *guard.Answer, seed uint64) played {
	t.Helper()
	tr := d.newTr(t)
	tr.ResponseHeaders(200, d.ct)
	body := d.answer(answer)
	chunks := [][]byte{body}
	if d.stream {
		chunks = cut(body, seed)
	}
	p := played{first: -1, chunk: -1}
	at := 0
	for i, c := range chunks {
		if p.chunk < 0 && bytes.Contains(body[:at+len(c)], []byte("zé")) {
			p.chunk = i
		}
		at += len(c)
		eos := i == len(chunks)-1
		out, err := tr.ResponseBody(c, eos)
		if err != nil {
			t.Fatal(err)
		}
		texts := tr.Output().Texts
		if g != nil {
			if out, texts, err = g.Next(context.Background(), out, texts, eos); err != nil {
				t.Fatal(err)
			}
		}
		for _, tx := range texts {
			if tx.Kind != translate.TextAnswer {
				continue
			}
			var s string
			if err := json.Unmarshal(out[tx.Start-1:tx.End+1], &s); err != nil {
				t.Fatalf("a reported text is not a JSON string: %q", out[tx.Start-1:tx.End+1])
			}
			p.text += s
			if s != "" && p.first < 0 {
				p.first = i
			}
		}
		p.out = append(p.out, out...)
	}
	return p
}

// cut cuts b in chunks of 1 to 9 bytes.
func cut(b []byte, seed uint64) [][]byte {
	r := rand.New(rand.NewPCG(seed, 7))
	var out [][]byte
	for len(b) > 0 {
		n := min(len(b), 1+r.IntN(9))
		out = append(out, b[:n])
		b = b[n:]
	}
	return out
}

func newAnswer(d door, action guard.Action, kinds ...translate.TextKind) *guard.Answer {
	if kinds == nil {
		kinds = []translate.TextKind{translate.TextAnswer}
	}
	rule := &guard.Rule{Name: "no-zebra", Check: "regex", Phase: guard.Response, Action: action, Patterns: []*regexp.Regexp{zebra}, Kinds: kinds}
	return guard.NewAnswer(guard.AnswerConfig{Rules: []*guard.Rule{rule}, Window: guard.Window{Size: 32, Overlap: 16}, Dialect: d.dialect,
		Stream: d.stream, Masker: guard.NewMasker([]byte("key"), "acct"), IncludeUsage: true,
		Usage: func() translate.Usage { return translate.Usage{PromptTokens: 9, CompletionTokens: 60, TotalTokens: 69} }})
}

// A response rule that blocks ends the answer with its client API's own
// refusal, and no byte of the match reaches the client: not in a piece of
// text, not in a done event or final object, not split across chunks or
// inside a UTF-8 sequence, on every front door, JSON and streamed. A
// stream is not gathered: text before the match reaches the client
// before the match arrives.
func TestAnswerBlock(t *testing.T) {
	for _, d := range doors() {
		for seed := range uint64(8) {
			if !d.stream && seed > 0 {
				continue
			}
			t.Run(fmt.Sprintf("%s/%d", d.name, seed), func(t *testing.T) {
				g := newAnswer(d, guard.Block)
				p := play(t, d, g, seed)
				if !g.Blocked() {
					t.Fatal("not blocked")
				}
				if zebra.MatchString(p.text) || strings.Contains(clienttext.Strings(t, p.out, d.stream), "bra-42") {
					t.Fatalf("the match reached the client:\n%s", p.out)
				}
				if d.stream && (p.first < 0 || p.first >= p.chunk) {
					t.Errorf("the first text went in chunk %d, the match came in chunk %d: the stream was held, not windowed", p.first, p.chunk)
				}
				if d.stream && !strings.HasPrefix(answer, p.text) || len(p.text) > len(before) {
					t.Errorf("the client got %q, want a prefix of the text before the match", p.text)
				}
				checkRefusal(t, d, p.out)
				if o := g.Outcomes(); len(o) != 1 || o[0].Result != guard.Blocked || o[0].Phase != guard.Response {
					t.Errorf("outcomes %+v", o)
				}
			})
		}
	}
}

// checkRefusal checks the end of a blocked answer in its API.
func checkRefusal(t *testing.T, d door, out []byte) {
	t.Helper()
	if !d.stream {
		var a struct {
			Choices []struct {
				FinishReason string `json:"finish_reason"`
			}
			StopReason        string `json:"stop_reason"`
			Status            string
			IncompleteDetails struct{ Reason string } `json:"incomplete_details"`
		}
		if err := json.Unmarshal(out, &a); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		switch d.dialect {
		case translate.Chat:
			spec.ValidateT(t, "CreateChatCompletionResponse", out)
			if len(a.Choices) != 1 || a.Choices[0].FinishReason != "content_filter" {
				t.Errorf("chat answer %s", out)
			}
		case translate.Messages:
			if a.StopReason != "refusal" {
				t.Errorf("Messages answer %s", out)
			}
		case translate.Responses:
			spec.ValidateT(t, "Response", out)
			if a.Status != "incomplete" || a.IncompleteDetails.Reason != "content_filter" {
				t.Errorf("Responses answer %s", out)
			}
		}
		return
	}
	var dec sse.Decoder
	events := dec.Feed(out)
	if dec.Pending() || len(events) < 2 {
		t.Fatalf("the stream %q", out)
	}
	last := events[len(events)-1]
	switch d.dialect {
	case translate.Chat:
		spec.ValidateSSE(t, "CreateChatCompletionStreamResponse", out)
		fin, usage := string(events[len(events)-3].Data), string(events[len(events)-2].Data)
		if string(last.Data) != "[DONE]" || !strings.Contains(fin, `"finish_reason":"content_filter"`) || !strings.Contains(usage, `"completion_tokens":60`) {
			t.Errorf("the chat stream ends %s\n%s\n%s", fin, usage, last.Data)
		}
	case translate.Messages:
		if events[0].Type != "message_start" {
			t.Errorf("the Messages stream starts with %s", events[0].Data)
		}
		delta := string(events[len(events)-2].Data)
		if last.Type != "message_stop" || !strings.Contains(delta, `"stop_reason":"refusal"`) {
			t.Errorf("the Messages stream ends %s\n%s", delta, last.Data)
		}
		open := 0
		for _, ev := range events {
			switch ev.Type {
			case "content_block_start":
				open++
			case "content_block_stop":
				open--
			}
		}
		if open != 0 {
			t.Errorf("%d content blocks left open", open)
		}
	case translate.Responses:
		spec.ValidateSSE(t, "ResponseStreamEvent", out)
		var inc struct {
			Type     string
			Response struct {
				Status            string
				IncompleteDetails struct{ Reason string } `json:"incomplete_details"`
			}
		}
		if json.Unmarshal(last.Data, &inc) != nil || inc.Type != "response.incomplete" || inc.Response.IncompleteDetails.Reason != "content_filter" {
			t.Errorf("the Responses stream ends %s", last.Data)
		}
		if events[0].Type != "response.created" {
			t.Errorf("the Responses stream starts with %s", events[0].Type)
		}
	}
}

// A rule that masks replaces the match, and only the match, the same way
// wherever it is: in the pieces of a stream (cut across them and inside a
// UTF-8 sequence), in a done event and final object that repeat the text,
// in a JSON answer. The rest of the answer is what the provider said.
func TestAnswerMask(t *testing.T) {
	mask := guard.NewMasker([]byte("key"), "acct").Mask([]byte(match))
	want := before + mask + after
	for _, d := range doors() {
		for seed := range uint64(8) {
			if !d.stream && seed > 0 {
				continue
			}
			t.Run(fmt.Sprintf("%s/%d", d.name, seed), func(t *testing.T) {
				g := newAnswer(d, guard.Mask)
				p := play(t, d, g, seed)
				if p.text != want {
					t.Fatalf("the client got %q\nwant %q", p.text, want)
				}
				if all := clienttext.Strings(t, p.out, d.stream); strings.Contains(all, "bra-42") || !strings.Contains(all, mask) {
					t.Errorf("the match reached the client, or its mask did not:\n%s", p.out)
				}
				if d.stream && (p.first < 0 || p.first >= p.chunk) {
					t.Errorf("the first text went in chunk %d, the match came in chunk %d", p.first, p.chunk)
				}
				switch {
				case d.dialect == translate.Chat && d.stream:
					spec.ValidateSSE(t, "CreateChatCompletionStreamResponse", p.out)
				case d.dialect == translate.Responses && d.stream:
					spec.ValidateSSE(t, "ResponseStreamEvent", p.out)
				}
				if o := g.Outcomes(); o[0].Result != guard.Masked {
					t.Errorf("outcomes %+v", o)
				}
			})
		}
	}
}

// A rule that monitors changes nothing: the client gets the bytes it gets
// without rules, and the outcome says monitored. A rule that matches
// nothing is allowed, and changes nothing either.
func TestAnswerMonitorAndAllow(t *testing.T) {
	for _, d := range doors() {
		t.Run(d.name, func(t *testing.T) {
			plain := play(t, d, nil, 3)
			g := newAnswer(d, guard.Monitor)
			if p := play(t, d, g, 3); !bytes.Equal(sameIDs(p.out), sameIDs(plain.out)) {
				t.Errorf("monitored:\n%s\nwant\n%s", p.out, plain.out)
			}
			if o := g.Outcomes(); o[0].Result != guard.Monitored {
				t.Errorf("outcomes %+v", o)
			}
			g = newAnswer(d, guard.Block, translate.TextReasoning) // reads no text there is
			if p := play(t, d, g, 3); !bytes.Equal(sameIDs(p.out), sameIDs(plain.out)) || g.Blocked() {
				t.Errorf("a rule on reasoning changed the answer:\n%s", p.out)
			}
			if o := g.Outcomes(); o[0].Result != guard.Allowed {
				t.Errorf("outcomes %+v", o)
			}
		})
	}
}

// A match longer than a window is still found whole: it is cut across
// several checks, and the overlap holds its start.
func TestAnswerLongMatchAcrossWindows(t *testing.T) {
	d := doors()[0]
	long := regexp.MustCompile(`fox jumps over the lazy dog\. The quick`)
	rule := &guard.Rule{Name: "long", Phase: guard.Response, Action: guard.Mask, Patterns: []*regexp.Regexp{long}, Kinds: []translate.TextKind{translate.TextAnswer}}
	g := guard.NewAnswer(guard.AnswerConfig{Rules: []*guard.Rule{rule}, Window: guard.Window{Size: 8, Overlap: 40}, Dialect: d.dialect,
		Stream: true, Masker: guard.NewMasker([]byte("key"), "acct"), Usage: func() translate.Usage { return translate.Usage{} }})
	p := play(t, d, g, 1)
	if long.MatchString(p.text) || strings.Count(p.text, "[masked:") != 9 {
		t.Errorf("the client got %q", p.text)
	}
}

// The arguments of a tool call a rule reads are held until the answer
// ends, then masked; a rule that does not read them leaves them.
func TestAnswerToolArguments(t *testing.T) {
	args := `{"command":"echo zebra-42"}`
	var b strings.Builder
	b.WriteString(`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"sh","arguments":""}}]},"finish_reason":null}]}` + "\n\n")
	for _, p := range pieces(args) {
		fmt.Fprintf(&b, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":%s}}]},"finish_reason":null}]}`+"\n\n", quote(p))
	}
	b.WriteString(`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}` + "\n\ndata: [DONE]\n\n")
	d := doors()[0]
	d.answer = func(string) []byte { return []byte(b.String()) }
	for _, tt := range []struct {
		kinds []translate.TextKind
		held  bool
	}{{[]translate.TextKind{translate.TextArguments}, true}, {nil, false}} {
		g := newAnswer(d, guard.Mask, tt.kinds...)
		tr := d.newTr(t)
		tr.ResponseHeaders(200, d.ct)
		chunks := cut([]byte(b.String()), 2)
		var client []byte
		for i, c := range chunks {
			eos := i == len(chunks)-1
			out, err := tr.ResponseBody(c, eos)
			if err != nil {
				t.Fatal(err)
			}
			out, _, err = g.Next(context.Background(), out, tr.Output().Texts, eos)
			if err != nil {
				t.Fatal(err)
			}
			if !eos && tt.held && bytes.Contains(out, []byte(`"arguments":"{`)) {
				t.Fatalf("arguments released before the end: %s", out)
			}
			client = append(client, out...)
		}
		masked := strings.Contains(clienttext.Strings(t, client, true), "[masked:")
		if masked != tt.held || tt.held && strings.Contains(string(client), "bra-42") {
			t.Errorf("kinds %v: %s", tt.kinds, client)
		}
	}
}

// Masks are the same for the same value and account, and differ between
// accounts and values.
func TestMasker(t *testing.T) {
	a, again, b := guard.NewMasker([]byte("key"), "a"), guard.NewMasker([]byte("key"), "a"), guard.NewMasker([]byte("key"), "b")
	x := a.Mask([]byte("x"))
	if again.Mask([]byte("x")) != x || b.Mask([]byte("x")) == x || a.Mask([]byte("y")) == x || guard.NewMasker([]byte("other"), "a").Mask([]byte("x")) == x {
		t.Error("masks")
	}
	if m := a.Mask([]byte("x")); !strings.HasPrefix(m, "[masked:") || !utf8.ValidString(m) {
		t.Errorf("mask %q", m)
	}
}

// sameIDs are b with the ids a translator makes for each answer (a
// Messages bridge's message id) made the same.
func sameIDs(b []byte) []byte { return msgID.ReplaceAll(b, []byte(`"msg_"`)) }

var msgID = regexp.MustCompile(`"msg_[0-9a-f]{24}"`)

// A stream whose text is held sends its client its API's keep-alive when
// it got nothing for KeepAlive, and only then.
func TestAnswerKeepAlive(t *testing.T) {
	for _, d := range doors()[:3] { // chat twice, Messages
		now := time.Unix(0, 0)
		g := guard.NewAnswer(guard.AnswerConfig{Rules: []*guard.Rule{{Name: "r", Action: guard.Block, Patterns: []*regexp.Regexp{zebra},
			Kinds: []translate.TextKind{translate.TextAnswer}}}, Window: guard.Window{Size: 1000, Overlap: 10}, Dialect: d.dialect, Stream: true,
			Masker: guard.NewMasker(nil, ""), Usage: func() translate.Usage { return translate.Usage{} }, Now: func() time.Time { return now }})
		tr := d.newTr(t)
		tr.ResponseHeaders(200, d.ct)
		var pings []int
		for i, c := range cut(d.answer(answer), 1) {
			now = now.Add(time.Second)
			out, err := tr.ResponseBody(c, false)
			if err != nil {
				t.Fatal(err)
			}
			rel, _, err := g.Next(context.Background(), out, tr.Output().Texts, false)
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(rel, []byte("ping")) || bytes.HasPrefix(rel, []byte(": keep-alive")) {
				pings = append(pings, i)
			}
		}
		if len(pings) < 2 || pings[1]-pings[0] != int(guard.KeepAlive/time.Second) {
			t.Errorf("%s: keep-alives at chunks %v, want one every %v", d.name, pings, guard.KeepAlive)
		}
	}
}

// A rule that reads the answer whole holds it to its end and finds a
// match far longer than any window; without it, windows release the text
// and do not see a match that long (the documented limit of overlap).
func TestAnswerWhole(t *testing.T) {
	long := regexp.MustCompile(`The quick(?s:.*)zébra-42`) // the whole answer up to the match
	for _, whole := range []bool{true, false} {
		d := doors()[0]
		rule := &guard.Rule{Name: "long", Phase: guard.Response, Action: guard.Block, Patterns: []*regexp.Regexp{long},
			Kinds: []translate.TextKind{translate.TextAnswer}, Whole: whole}
		g := guard.NewAnswer(guard.AnswerConfig{Rules: []*guard.Rule{rule}, Window: guard.Window{Size: 32, Overlap: 16}, Dialect: d.dialect,
			Stream: true, Masker: guard.NewMasker(nil, ""), Usage: func() translate.Usage { return translate.Usage{} }})
		p := play(t, d, g, 4)
		if g.Blocked() != whole || (p.text != "") == whole {
			t.Errorf("whole %v: blocked %v, the client got %q", whole, g.Blocked(), p.text)
		}
	}
}
