package api

import "testing"

// A streamed thinking block is gathered piece by piece and given whole,
// once, when its block ends; a piece of another block starts that one.
func TestThinkingGatherer(t *testing.T) {
	var g ThinkingGatherer
	g.Text(1, []byte("stale"))
	g.Text(2, []byte("Let me "))
	g.Text(2, []byte("think."))
	g.Sign(2, "sig-")
	g.Sign(2, "2")
	if _, ok := g.End(1); ok {
		t.Error("ended a block that is not the open one")
	}
	b, ok := g.End(2)
	if !ok || b != (ThinkingBlock{Type: "thinking", Thinking: "Let me think.", Signature: "sig-2"}) {
		t.Errorf("block %+v, %v", b, ok)
	}
	if _, ok := g.End(2); ok {
		t.Error("a block ended twice")
	}
}
