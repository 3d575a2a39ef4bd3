package guard

import (
	"context"

	"modelgate/translate"
)

// Service is a guard service a rule checks text with (package
// guard/services has one per wire contract). Check makes one call, with
// no retries; ctx bounds it. An error is the service failing: the
// rule's failure mode decides what it does.
type Service interface {
	Check(ctx context.Context, in Input) (Verdict, error)
}

// Input is one text a rule has a service check.
type Input struct {
	Phase Phase
	// Text is the text: one message's (or a conversation's, joined) of a
	// request, or a window of an answer.
	Text string
	// Part is what a request's text is; Kind what an answer's is.
	Part translate.Part
	Kind translate.TextKind
}

// Verdict is what a service says of a text.
type Verdict struct {
	// Flagged: the text breaks the service's policy.
	Flagged bool
	// Spans are where, [start, end) byte offsets into Input.Text, when
	// the service says: a mask covers them. A flagged verdict without
	// spans cannot be masked, only blocked or monitored.
	Spans [][2]int
}
