package translate

// What a translator produced, as it tells the gateway: the generated text
// in each piece of output it returns and the reasons the answer ended. The
// gateway reads nothing of the client's bytes itself: the estimate of an
// answer cut short counts the text reported, the trace span names the
// finish reasons reported, payload capture hides the text reported, and a
// guard can read each piece of text as it passes, hold the output that
// carries it and release it with a later reply (output comes in whole
// client events, so held output can be sent later as it is).

// TextKind says what a piece of generated text is.
type TextKind uint8

const (
	// TextAnswer is the answer's own text: chat's content, the Responses
	// API's output_text, a Messages text block.
	TextAnswer TextKind = iota
	// TextReasoning is reasoning the client is shown: reasoning_content,
	// reasoning summaries, thinking blocks.
	TextReasoning
	// TextRefusal is a refusal's text.
	TextRefusal
	// TextArguments are the arguments of a tool call the model made (a
	// function's, a custom tool's input, a Messages tool_use input).
	TextArguments
)

var textKindNames = [...]string{"answer", "reasoning", "refusal", "arguments"}

func (k TextKind) String() string {
	if int(k) < len(textKindNames) {
		return textKindNames[k]
	}
	return "unknown"
}

// Text is one piece of generated text in a translator's output: the
// contents of one JSON string, out[Start:End], as written (JSON escapes
// included), where out is what the ResponseBody call returned.
type Text struct {
	Start, End int
	Kind       TextKind
}

// Output is what a translator tells of the bytes one ResponseBody call
// returned.
type Output struct {
	// Texts are the pieces of generated text in them, in order. A
	// stream's text is reported once, as it is streamed: the repeats of
	// done events and final objects (a Responses stream's
	// response.output_text.done and response.completed) are not.
	Texts []Text
	// FinishReasons are the reasons the answer ended that they state, in
	// the client API's words (chat's finish_reason, the Messages API's
	// stop_reason, a Responses answer's status or incomplete reason), in
	// order, each once.
	FinishReasons []string

	later later // the output Later was told of, not yet scanned
}

// later is an output to scan when the report is read.
type later struct {
	d      Dialect
	out    []byte
	status int
	stream bool
	set    bool
}

// Later has o report out, of a ResponseBody call in client API d, when
// it is next read (Scanned): a translator leaves the scan to who reads
// its report, and the gateway reads it only where it needs it (a stream's
// text, a span's finish reasons, a capture that hides text).
func (o *Output) Later(d Dialect, out []byte, status int, stream bool) {
	o.later = later{d: d, out: out, status: status, stream: stream, set: true}
}

// Scanned is o, with the output Later told it of scanned first.
func (o *Output) Scanned() *Output {
	if l := o.later; l.set {
		o.Scan(l.d, l.out, l.status, l.stream)
	}
	return o
}

// TextBytes is how many bytes of generated text o reports.
func (o *Output) TextBytes() int {
	n := 0
	for _, t := range o.Texts {
		n += t.End - t.Start
	}
	return n
}

// Reset empties o for the next piece of output, keeping its storage.
func (o *Output) Reset() {
	o.Texts, o.FinishReasons, o.later = o.Texts[:0], o.FinishReasons[:0], later{}
}

// Reporter is what every translator is (Translator embeds it): it tells
// what the bytes its last ResponseBody call returned carry. The Output is
// the translator's and valid until its next ResponseBody call; a
// translator of an endpoint that generates no text (embeddings, images)
// reports an empty one (NoText).
type Reporter interface {
	Output() *Output
}

// Part says what a piece of a request's text is, as a guard reads it.
type Part uint8

const (
	// PartUser is the user's text.
	PartUser Part = iota
	// PartSystem is the system's (and the developer's) instructions.
	PartSystem
	// PartAssistant is an earlier answer's text sent back.
	PartAssistant
	// PartToolResult is what a tool the client ran returned.
	PartToolResult
)

var partNames = [...]string{"user", "system", "assistant", "tool_result"}

// Parts are the parts of a request's text, in order.
var Parts = []Part{PartUser, PartSystem, PartAssistant, PartToolResult}

func (p Part) String() string {
	if int(p) < len(partNames) {
		return partNames[p]
	}
	return "unknown"
}

// RequestText is one piece of the client's text in a request: the text
// of a message, a content part or a tool's result, by the part it is.
// What is not text the client wrote or a tool returned is never one: tool
// inputs, thinking and its signatures, encrypted reasoning, cache
// markers, images and files.
type RequestText struct {
	Part Part
	Text string
}
