package guard

import (
	"context"
	"slices"
	"sync"

	"modelgate/translate"
)

// Checked is what the request rules did to a request.
type Checked struct {
	Outcomes []Outcome
	// Blocked is the rule that blocked the request; Failed the rule whose
	// service failed with failure closed: the first of them, in order.
	// Err is Failed's service's error, for the logs.
	Blocked, Failed *Rule
	Err             error
	// Masked are the texts with what mask rules matched masked, one for
	// each text checked, in order; nil when nothing was masked.
	Masked []string
}

// Check runs request rules on the client's text, in order: the rules'
// services are asked all at once, within ctx, verdicts kept in cache;
// then the first rule that blocks (or whose service fails closed) decides
// and the rules after it record nothing. m masks what mask rules match.
func Check(ctx context.Context, rules []*Rule, texts []translate.RequestText, cache *Cache, m Masker) Checked {
	inputs := make([][]input, len(rules))
	for i, r := range rules {
		inputs[i] = inputsOf(r, texts)
	}
	found := ask(ctx, rules, inputs, cache)
	var c Checked
	var masks [][][2]int // per text
	for i, r := range rules {
		res, hits := Allowed, found[i]
		switch {
		case hits.flagged && r.Action == Mask && len(hits.spans) == 0:
			res = Blocked // what the service flagged has no place to mask
		case hits.flagged:
			res = matched(r.Action)
		case hits.err != nil && r.Failure == Open:
			res = ErrorOpen
		case hits.err != nil:
			res = ErrorClosed
		}
		c.Outcomes = append(c.Outcomes, Outcome{Rule: r.Name, Check: r.Check, Phase: Request, Result: res, Cost: r.callsCost(hits.calls)})
		switch res {
		case Blocked:
			c.Blocked = r
			return c
		case ErrorClosed:
			c.Failed, c.Err = r, hits.err
			return c
		case Masked:
			if masks == nil {
				masks = make([][][2]int, len(texts))
			}
			for _, s := range hits.spans {
				masks[s.text] = append(masks[s.text], [2]int{s.a, s.b})
			}
		}
	}
	if masks != nil {
		c.Masked = make([]string, len(texts))
		for i, t := range texts {
			c.Masked[i] = maskText(t.Text, masks[i], m)
		}
	}
	return c
}

// input is one text a rule checks: a piece of the request's, or the
// pieces of one part joined (a conversation rule). at are where the
// pieces start in it.
type input struct {
	text   string
	part   translate.Part
	pieces []int
	at     []int
}

func inputsOf(r *Rule, texts []translate.RequestText) []input {
	var out []input
	for _, part := range r.Parts {
		var joined *input
		for i, t := range texts {
			switch {
			case t.Part != part:
			case !r.Conversation:
				out = append(out, input{text: t.Text, part: part, pieces: []int{i}, at: []int{0}})
			case joined == nil:
				out = append(out, input{part: part})
				joined = &out[len(out)-1]
				fallthrough
			default:
				joined.pieces, joined.at = append(joined.pieces, i), append(joined.at, len(joined.text))
				joined.text += t.Text
			}
		}
	}
	return out
}

// pieceSpan is [a, b) of text number text.
type pieceSpan struct{ text, a, b int }

// found is what one rule found in its inputs.
type found struct {
	flagged bool
	spans   []pieceSpan
	err     error // a service's, when none of its answers flagged
	calls   int   // made to its service (not answered from the cache)
}

// ask checks each rule's inputs: patterns at once, services in parallel.
func ask(ctx context.Context, rules []*Rule, inputs [][]input, cache *Cache) []found {
	out := make([]found, len(rules))
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i, r := range rules {
		for _, in := range inputs[i] {
			if r.Backend == nil {
				r.find([]byte(in.text), func(a, b int) { out[i].add(in, a, b) })
				continue
			}
			wg.Go(func() {
				v, called, err := r.Backend.checkCached(ctx, cache, Input{Phase: Request, Text: in.text, Part: in.part})
				mu.Lock()
				defer mu.Unlock()
				if called {
					out[i].calls++
				}
				switch {
				case err != nil:
					out[i].err = err
				case v.Flagged && len(v.Spans) == 0:
					out[i].flagged = true
				case v.Flagged:
					for _, s := range v.Spans {
						out[i].add(in, s[0], s[1])
					}
				}
			})
		}
	}
	wg.Wait()
	return out
}

// add notes [a, b) of in: flagged, and the parts of the pieces it spans.
func (f *found) add(in input, a, b int) {
	f.flagged = true
	for k, p := range in.pieces {
		start := in.at[k]
		end := len(in.text)
		if k+1 < len(in.at) {
			end = in.at[k+1]
		}
		if s, e := max(a, start), min(b, end); s < e {
			f.spans = append(f.spans, pieceSpan{text: p, a: s - start, b: e - start})
		}
	}
}

// maskText is s with spans masked, each run of overlapping spans once.
func maskText(s string, spans [][2]int, m Masker) string {
	if len(spans) == 0 {
		return s
	}
	slices.SortFunc(spans, func(x, y [2]int) int { return x[0] - y[0] })
	var b []byte
	at := 0
	for i := 0; i < len(spans); {
		a, e := spans[i][0], spans[i][1]
		for i++; i < len(spans) && spans[i][0] < e; i++ {
			e = max(e, spans[i][1])
		}
		if a < at {
			a = at
		}
		b = append(b, s[at:a]...)
		b = append(b, m.Mask([]byte(s[a:e]))...)
		at = e
	}
	return string(append(b, s[at:]...))
}
