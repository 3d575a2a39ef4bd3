package responses

import (
	"strconv"

	"modelgate/translate/jsonscan"
)

// The stream fast paths read the few members of an event they need in
// place and write delta events directly, where decoding into structs or
// maps and json.Marshal would cost dozens of allocations per event. They
// must read and write exactly what encoding/json would, so they only take
// what they can be sure of and leave anything unusual to encoding/json.
// jsonscan checks, reads and writes the JSON for them.

// The members of a chat chunk (chatEvent) and of its parts.
var (
	chunkNames    = []string{"id", "object", "created", "model", "choices", "usage", "error"}
	choiceNames   = []string{"index", "delta", "finish_reason"}
	deltaNames    = []string{"role", "content", "reasoning_content", "tool_calls", "thinking_blocks", "refusal"}
	toolCallNames = []string{"index", "id", "type", "function"}
	functionNames = []string{"name", "arguments"}
)

// piece is one thing a chat chunk adds, as plainChunk reads it: JSON
// values still to decode, in the chunk.
type piece struct {
	kind         pieceKind
	index        int    // of a tool call
	text         []byte // reasoning, text, arguments or the finish reason
	callID, name []byte // of a tool call
}

type pieceKind uint8

const (
	reasoningPiece pieceKind = iota
	textPiece
	callPiece
	finishPiece
)

// plainChunk handles a chat chunk of the usual shape, text, reasoning and
// tool call deltas without usage or error, reading the members it needs
// in place: decoding every chunk into a chatEvent cost most of the time
// and allocations of a stream. It reports false, having done nothing, for
// a chunk it cannot be sure to read as encoding/json would (invalid JSON,
// a member of a type that does not decode, an unusual key) or that carries
// usage or an error; decodedChunk then handles that one.
//
// It reads the whole chunk into s.pieces before it acts on any, so that
// nothing is done for a chunk found unusual halfway, and then acts on
// them in the order decodedChunk does.
func (s *Stream) plainChunk(data []byte) bool {
	var top [7][]byte
	if !jsonscan.Valid(data) || !jsonscan.PlainMembers(data, chunkNames, top[:]) {
		return false
	}
	id, object, created, model, choices, usage, errObj := top[0], top[1], top[2], top[3], top[4], top[5], top[6]
	if !nullOr(id, jsonscan.String) || !nullOr(object, jsonscan.String) || !intOrNull(created, 64) ||
		!nullOr(model, jsonscan.String) || !jsonscan.IsNull(usage) || !jsonscan.IsNull(errObj) {
		return false
	}
	s.pieces = s.pieces[:0]
	if !elements(choices, s.readChoice) {
		return false
	}
	if !s.started {
		s.start()
	}
	for _, p := range s.pieces {
		switch p.kind {
		case reasoningPiece:
			if text := jsonscan.Unquote(p.text, &s.scratch); len(text) > 0 {
				s.reason(text)
			}
		case textPiece:
			if text := jsonscan.Unquote(p.text, &s.scratch); len(text) > 0 {
				s.textDelta(text)
			}
		case callPiece:
			it := s.calls[p.index]
			if it == nil {
				it = s.openCall(p.index, stringOf(p.callID), stringOf(p.name))
			}
			if args := jsonscan.Unquote(p.text, &s.scratch); len(args) > 0 {
				s.argumentsDelta(it, args)
			}
		case finishPiece:
			s.finish = stringOf(p.text)
		}
	}
	clear(s.pieces) // let go of the chunk
	return true
}

// elements reads each element of the array arr (absent or null is empty)
// with read.
func elements(arr []byte, read func([]byte) bool) bool {
	if jsonscan.IsNull(arr) {
		return true
	}
	it, ok := jsonscan.Entries(arr, 0)
	if !ok || it.Object {
		return false
	}
	for {
		e, more := it.Next()
		if !more {
			return it.OK
		}
		if !read(e.Value) {
			return false
		}
	}
}

func (s *Stream) readChoice(obj []byte) bool {
	if jsonscan.IsNull(obj) {
		return true // a choice without members adds nothing
	}
	var m [3][]byte
	if !jsonscan.PlainMembers(obj, choiceNames, m[:]) {
		return false
	}
	index, delta, finish := m[0], m[1], m[2]
	if !intOrNull(index, strconv.IntSize) || !nullOr(finish, jsonscan.String) || !s.readDelta(delta) {
		return false
	}
	if !jsonscan.IsNull(finish) {
		s.pieces = append(s.pieces, piece{kind: finishPiece, text: finish})
	}
	return true
}

// readDelta reads a delta's reasoning, text and tool calls, in the order
// decodedChunk acts on them.
func (s *Stream) readDelta(obj []byte) bool {
	if jsonscan.IsNull(obj) {
		return true
	}
	var m [6][]byte
	// Thinking blocks and refusals, rare, are decodedChunk's.
	if !jsonscan.PlainMembers(obj, deltaNames, m[:]) || !jsonscan.IsNull(m[4]) || !jsonscan.IsNull(m[5]) {
		return false
	}
	role, content, reasoning, calls := m[0], m[1], m[2], m[3]
	if !nullOr(role, jsonscan.String) || !nullOr(content, jsonscan.String) || !nullOr(reasoning, jsonscan.String) {
		return false
	}
	if !jsonscan.IsNull(reasoning) {
		s.pieces = append(s.pieces, piece{kind: reasoningPiece, text: reasoning})
	}
	if !jsonscan.IsNull(content) {
		s.pieces = append(s.pieces, piece{kind: textPiece, text: content})
	}
	return elements(calls, s.readToolCall)
}

func (s *Stream) readToolCall(obj []byte) bool {
	var m [4][]byte
	var f [2][]byte
	if !jsonscan.IsNull(obj) && !jsonscan.PlainMembers(obj, toolCallNames, m[:]) {
		return false
	}
	index, callID, typ, fn := m[0], m[1], m[2], m[3]
	if !jsonscan.IsNull(fn) && !jsonscan.PlainMembers(fn, functionNames, f[:]) {
		return false
	}
	name, args := f[0], f[1]
	if !intOrNull(index, strconv.IntSize) || !nullOr(callID, jsonscan.String) || !nullOr(typ, jsonscan.String) ||
		!nullOr(name, jsonscan.String) || !nullOr(args, jsonscan.String) {
		return false
	}
	i := 0 // the chat translators always number the pieces
	if !jsonscan.IsNull(index) {
		i, _ = strconv.Atoi(string(index))
	}
	s.pieces = append(s.pieces, piece{kind: callPiece, index: i, text: args, callID: callID, name: name})
	return true
}

// nullOr reports whether the member value v (valid JSON) is absent, null
// or of kind (a jsonscan kind).
func nullOr(v []byte, kind byte) bool {
	k := jsonscan.Kind(v)
	return k == 0 || k == jsonscan.Null || k == kind
}

// intOrNull reports whether encoding/json decodes the member value v into
// an int of bits bits without error: absent, null, or an integer in range.
func intOrNull(v []byte, bits int) bool {
	if jsonscan.IsNull(v) {
		return true
	}
	if !jsonscan.IsInt(v) {
		return false
	}
	_, err := strconv.ParseInt(string(v), 10, bits)
	return err == nil
}
