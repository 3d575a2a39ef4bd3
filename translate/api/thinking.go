package api

import "strings"

// ThinkingGatherer gathers the thinking block a provider streams in
// pieces, its text and its signature, so that it goes to the client whole
// when it ends (ThinkingBlock). A piece for another block index starts
// that block. The zero value has no block open.
type ThinkingGatherer struct {
	index     int // the open block's index + 1; 0 when none is open
	text      strings.Builder
	signature strings.Builder
}

// at opens the block at index unless it is the open one.
func (g *ThinkingGatherer) at(index int) {
	if g.index != index+1 {
		g.index = index + 1
		g.text.Reset()
		g.signature.Reset()
	}
}

// Text adds a piece of the text of the block at index.
func (g *ThinkingGatherer) Text(index int, text []byte) {
	g.at(index)
	g.text.Write(text)
}

// Sign adds a piece of the signature of the block at index.
func (g *ThinkingGatherer) Sign(index int, signature string) {
	g.at(index)
	g.signature.WriteString(signature)
}

// End returns the block at index when it is the open one, and closes it.
func (g *ThinkingGatherer) End(index int) (ThinkingBlock, bool) {
	if g.index != index+1 {
		return ThinkingBlock{}, false
	}
	g.index = 0
	return ThinkingBlock{Type: "thinking", Thinking: g.text.String(), Signature: g.signature.String()}, true
}
