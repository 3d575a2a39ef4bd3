package api

import (
	"strconv"

	"modelgate/translate/jsonscan"
)

// Append-style writers of chunk events, for translators that run once
// per streamed token and write their chunks by appending rather than
// through encoding/json, which costs a few microseconds and a few dozen
// allocations per chunk. What they append is byte for byte what Chunk and
// Delta write; the text they copy in is a string token of the provider's
// JSON, re-encoded by jsonscan.AppendTokenBody without being decoded.

// ChunkHead is the start of every chunk event of the stream, up to the
// choices: `data: {"id":…,"object":"chat.completion.chunk","created":…,
// "model":…,"choices":[`. A stream computes it once; each chunk then
// appends its choices and ChunkTail, and is the event Chunk would write.
func (w ChunkWriter) ChunkHead() []byte {
	return w.appendChunkHead(make([]byte, 0, 96+len(w.ID)+len(w.Model)))
}

func (w ChunkWriter) appendChunkHead(b []byte) []byte {
	b = append(b, `data: {"id":`...)
	b = jsonscan.AppendQuoted(b, w.ID)
	b = append(b, `,"object":"chat.completion.chunk","created":`...)
	b = strconv.AppendInt(b, w.Created, 10)
	b = append(b, `,"model":`...)
	b = jsonscan.AppendQuoted(b, w.Model)
	return append(b, `,"choices":[`...)
}

// ChunkTail ends a chunk event that ChunkHead started.
const ChunkTail = "]}\n\n"

// DeltaChunks writes the chunks of one stream whose delta carries one
// text, which are most of a stream: content, reasoning content or a piece
// of a tool call's arguments, as Delta writes them. Its zero value is
// ready once Use has told it the stream.
type DeltaChunks struct {
	w      ChunkWriter
	prefix []byte // ChunkHead and `{"index":0,"delta":{`
}

// deltaSuffix ends a chunk without a finish reason after its delta.
const deltaSuffix = `},"finish_reason":null}` + ChunkTail

// Use makes d write the chunks of w's stream. The prefix the chunks share
// is built again only when w differs from the last one, so a translator
// can call Use before every chunk.
func (d *DeltaChunks) Use(w ChunkWriter) {
	if d.prefix != nil && d.w == w {
		return
	}
	d.w = w
	d.prefix = append(w.appendChunkHead(d.prefix[:0]), `{"index":0,"delta":{`...)
}

// Content appends the chunk of Delta{Content: &s}, where s is the text of
// tok, a string token of valid JSON (as jsonscan.Cursor.StringToken
// returns it).
func (d *DeltaChunks) Content(dst, tok []byte) []byte {
	dst = d.begin(dst, len(`"content":`)+len(tok))
	dst = append(dst, `"content":"`...)
	return d.end(dst, tok, "")
}

// Reasoning appends the chunk of Delta{ReasoningContent: s}; s must not be
// empty (omitempty would drop the member), which the caller checks.
func (d *DeltaChunks) Reasoning(dst, tok []byte) []byte {
	dst = d.begin(dst, len(`"reasoning_content":`)+len(tok))
	dst = append(dst, `"reasoning_content":"`...)
	return d.end(dst, tok, "")
}

// ToolArguments appends the chunk of a tool call piece that carries only
// its index and (part of) its arguments.
func (d *DeltaChunks) ToolArguments(dst []byte, index int, tok []byte) []byte {
	dst = d.begin(dst, len(`"tool_calls":[{"index":,"function":{"arguments":}}]`)+20+len(tok))
	dst = append(dst, `"tool_calls":[{"index":`...)
	dst = strconv.AppendInt(dst, int64(index), 10)
	dst = append(dst, `,"function":{"arguments":"`...)
	return d.end(dst, tok, "}}]")
}

// begin makes room for a chunk whose delta takes about size bytes, and
// appends the prefix. Most texts need no escapes, so one allocation at
// most is the usual.
func (d *DeltaChunks) begin(dst []byte, size int) []byte {
	need := len(d.prefix) + size + len(deltaSuffix)
	if cap(dst)-len(dst) < need {
		grown := make([]byte, len(dst), max(len(dst)+need+size/4, 2*cap(dst)))
		copy(grown, dst)
		dst = grown
	}
	return append(dst, d.prefix...)
}

// end appends the re-encoded text of tok and its closing quote, tail and
// the end of the chunk.
func (d *DeltaChunks) end(dst, tok []byte, tail string) []byte {
	dst = jsonscan.AppendTokenBody(dst, tok)
	dst = append(dst, '"')
	dst = append(dst, tail...)
	return append(dst, deltaSuffix...)
}
