package translate

import "bytes"

// Dialect is the client API a translator's output is written in, which
// decides the members that hold its text and its finish reasons.
type Dialect uint8

const (
	// Chat is the chat completions API: chunks' content,
	// reasoning_content, refusal and tool call arguments, and
	// finish_reason.
	Chat Dialect = iota + 1
	// Responses is the Responses API: its events' deltas, and the final
	// response's status (or incomplete reason).
	Responses
	// Messages is Anthropic's Messages API: text, thinking and
	// partial_json deltas, and stop_reason.
	Messages
	// Transcription is the transcriptions API: a stream's delta events,
	// a JSON answer's top-level text (its segments repeat it); a plain
	// text answer (text, srt, vtt) is text as a whole.
	Transcription
)

// NoText is embedded in the translators of endpoints that generate no
// text (embeddings, images, count_tokens): their Output is empty.
type NoText struct{ out Output }

// Output implements Reporter.
func (n *NoText) Output() *Output { return &n.out }

// Scan resets o and reports what out, the bytes a ResponseBody call
// returned, carries in the client API d: stream events when stream is
// set, else a whole JSON answer. An error answer (status 400 and above)
// carries nothing. One pass over out; no allocation once o's slices
// have grown (known finish reasons are not copied).
//
// The members are found as the gateway has always counted them, by
// name at any depth of JSON of any spacing, so a server's chunks passed
// through as written are read too: a whole answer's text is in content,
// reasoning_content, refusal, arguments, text and thinking; a Responses
// stream's in its events' delta members alone (their done events and
// final response repeat it).
func (o *Output) Scan(d Dialect, out []byte, status int, stream bool) {
	o.Reset()
	if status >= 400 {
		return
	}
	// Chat and Messages streams are read by member names alone, so their
	// nesting is not followed: the next string is found at IndexByte's
	// speed.
	s := scanner{o: o, dialect: d, stream: stream, respDepth: 1, nesting: !stream || d == Responses || d == Transcription}
	if stream {
		s.respDepth = 2 // the response object of response.completed and the like
	}
	if d == Transcription && !stream && !isJSON(out) {
		o.Texts = append(o.Texts, Text{Start: 0, End: len(out), Kind: TextAnswer})
		return
	}
	s.run(out)
}

func isJSON(b []byte) bool {
	i := skipSpace(b, 0)
	return i < len(b) && b[i] == '{'
}

// scanner walks the members of JSON documents (one answer, or a stream's
// events) and keeps the little state the dialects need.
type scanner struct {
	o       *Output
	dialect Dialect
	stream  bool
	nesting bool // the depth is followed
	depth   int  // of objects and arrays open at the current byte
	// respDepth is the depth of a Responses answer's members: 1 in a
	// whole answer, 2 in an event's response.
	respDepth int
	// A Responses event's kind, from its type, and its first Text (the
	// type may follow the delta).
	eventKind  TextKind
	eventFirst int
	// The latest type member's value and depth, for a whole answer's
	// text parts (a reasoning summary's text is reasoning).
	typ      []byte
	typDepth int
	// A Responses answer's status, held until its object ends, as its
	// incomplete_details may come after it; parent is the last member
	// name of the response object, outer the last of a stream's event
	// (a response's is "response"; an output item's status is not one).
	status, reason, parent, outer []byte
}

func (s *scanner) run(out []byte) {
	for i := 0; i < len(out); {
		q := s.gap(out[i:])
		if q < 0 {
			break
		}
		start := i + q + 1
		end := start + stringEnd(out[start:])
		i = end + 1
		j := skipSpace(out, i)
		if j >= len(out) || out[j] != ':' {
			continue // a value, or an element of an array
		}
		if s.dialect == Responses {
			s.key(out[start:end])
		}
		j = skipSpace(out, j+1)
		if j >= len(out) || out[j] != '"' {
			i = j
			continue // the member's value is not a string
		}
		vs := j + 1
		ve := vs + stringEnd(out[vs:])
		s.member(out[start:end], vs, ve, out)
		i = ve + 1
	}
	s.endResponse()
}

// gap follows the nesting in the bytes up to the next string, and
// returns the index of its quote (-1 when there is none).
func (s *scanner) gap(b []byte) int {
	if !s.nesting {
		return bytes.IndexByte(b, '"')
	}
	for i, c := range b {
		switch c {
		case '"':
			return i
		case '{', '[':
			if s.depth == 0 {
				s.eventKind, s.eventFirst = TextAnswer, len(s.o.Texts)
			}
			s.depth++
		case '}', ']':
			if s.depth == s.respDepth {
				s.endResponse()
			}
			s.depth = max(s.depth-1, 0)
		}
	}
	return -1
}

// key notes a member's name of a Responses answer whatever its value:
// its incomplete_details is an object.
func (s *scanner) key(k []byte) {
	switch s.depth {
	case s.respDepth:
		s.parent = k
	case s.respDepth - 1:
		s.outer = k
	}
}

// inResponse reports a member of the response object itself.
func (s *scanner) inResponse() bool {
	return s.depth == s.respDepth && (!s.stream || string(s.outer) == "response")
}

// member reads one member whose value is the string out[vs:ve].
func (s *scanner) member(k []byte, vs, ve int, out []byte) {
	if s.dialect == Chat && s.stream { // most of what is scanned: one switch
		if kind, ok := chatKind(k); ok {
			s.text(vs, ve, kind)
		} else if string(k) == "finish_reason" && ve < len(out) {
			s.finish(out[vs:ve])
		}
		return
	}
	v := out[vs:ve]
	if string(k) == "type" {
		s.typ, s.typDepth = v, s.depth
		if s.dialect == Responses && s.stream && s.depth == 1 {
			s.setEventKind(v)
		}
		return
	}
	if kind, ok := s.textKind(k); ok {
		s.text(vs, ve, kind)
		return
	}
	if ve >= len(out) { // a string cut off: no reason is half a word
		return
	}
	switch s.dialect {
	case Chat:
		if string(k) == "finish_reason" {
			s.finish(v)
		}
	case Messages:
		if string(k) == "stop_reason" {
			s.finish(v)
		}
	case Responses:
		switch {
		case string(k) == "status" && s.inResponse():
			s.status = v
		case string(k) == "reason" && s.depth == s.respDepth+1 && string(s.parent) == "incomplete_details":
			s.reason = v
		}
	}
}

// textKind is the kind of text a member holds, if it holds text.
func (s *scanner) textKind(k []byte) (TextKind, bool) {
	if s.dialect == Transcription {
		if s.stream {
			return TextAnswer, string(k) == "delta"
		}
		return TextAnswer, string(k) == "text" && s.depth == 1
	}
	if !s.stream {
		return wholeKind(k, s.typ, s.typDepth == s.depth)
	}
	switch s.dialect {
	case Chat:
		return chatKind(k)
	case Responses:
		return s.eventKind, string(k) == "delta"
	case Messages:
		switch string(k) {
		case "text":
			return TextAnswer, true
		case "thinking":
			return TextReasoning, true
		case "partial_json":
			return TextArguments, true
		}
	}
	return 0, false
}

func chatKind(k []byte) (TextKind, bool) {
	switch string(k) {
	case "content":
		return TextAnswer, true
	case "reasoning_content":
		return TextReasoning, true
	case "refusal":
		return TextRefusal, true
	case "arguments":
		return TextArguments, true
	}
	return 0, false
}

// wholeKind is the kind of a whole answer's text member; typ is its
// object's type when sibling is set.
func wholeKind(k, typ []byte, sibling bool) (TextKind, bool) {
	switch string(k) {
	case "text":
		if sibling && (string(typ) == "summary_text" || string(typ) == "reasoning_text") {
			return TextReasoning, true
		}
		return TextAnswer, true
	case "thinking":
		return TextReasoning, true
	}
	return chatKind(k)
}

// setEventKind sets the kind of a Responses event's delta from its
// type, for the deltas before it in the event too.
func (s *scanner) setEventKind(typ []byte) {
	s.eventKind = responsesKind(typ)
	for i := s.eventFirst; i < len(s.o.Texts); i++ {
		s.o.Texts[i].Kind = s.eventKind
	}
}

func responsesKind(typ []byte) TextKind {
	switch string(typ) {
	case "response.reasoning_summary_text.delta", "response.reasoning_text.delta":
		return TextReasoning
	case "response.refusal.delta":
		return TextRefusal
	case "response.function_call_arguments.delta", "response.custom_tool_call_input.delta",
		"response.mcp_call_arguments.delta", "response.code_interpreter_call_code.delta":
		return TextArguments
	}
	return TextAnswer
}

// text reports out[vs:ve]; empty strings (a block's opening "text":"")
// carry nothing.
func (s *scanner) text(vs, ve int, kind TextKind) {
	if ve > vs {
		s.o.Texts = append(s.o.Texts, Text{Start: vs, End: ve, Kind: kind})
	}
}

// endResponse reports the status of the Responses answer whose object
// ends: a final one, and for an incomplete one its reason.
func (s *scanner) endResponse() {
	status, reason := s.status, s.reason
	s.status, s.reason, s.parent = nil, nil, nil
	switch string(status) {
	case "completed", "failed", "cancelled":
		s.finish(status)
	case "incomplete":
		if len(reason) > 0 {
			s.finish(reason)
		} else {
			s.finish(status)
		}
	}
}

// finish reports a finish reason once.
func (s *scanner) finish(r []byte) {
	if len(r) == 0 {
		return
	}
	for _, f := range s.o.FinishReasons {
		if f == string(r) {
			return
		}
	}
	s.o.FinishReasons = append(s.o.FinishReasons, reasonString(r))
}

// reasonString is r as a string, the known reasons without a copy.
func reasonString(r []byte) string {
	for _, k := range knownReasons {
		if k == string(r) {
			return k
		}
	}
	return string(r)
}

var knownReasons = [...]string{
	"stop", "length", "tool_calls", "content_filter", "function_call", // chat
	"end_turn", "max_tokens", "stop_sequence", "tool_use", "pause_turn", "refusal", "model_context_window_exceeded", // Messages
	"completed", "failed", "incomplete", "cancelled", "max_output_tokens", // Responses
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// stringEnd is the length of a JSON string's contents up to its closing
// quote (or the end of b). Strings are short, so a loop beats IndexByte's
// calls.
func stringEnd(b []byte) int {
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i
		}
	}
	return len(b)
}
