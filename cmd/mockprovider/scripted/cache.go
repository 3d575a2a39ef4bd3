package scripted

import (
	"crypto/sha256"
	"encoding/json"
	"sync"
)

// The model caches prompts as Anthropic documents its prompt caching
// (Claude on Bedrock the same, with cache points): a cache breakpoint
// caches the prompt's prefix up to and including the block it follows,
// in the order tools, system, messages; a later request reads the longest
// cached prefix it finds at one of its breakpoints or in the 20 blocks
// before each (the lookback that finds an earlier turn's breakpoint
// after the client moved its marker), and writes the rest up to its last
// breakpoint.

// segment is a block of the prompt: its content, and whether a breakpoint
// follows it.
type segment struct {
	content []byte
	marked  bool
}

// lookback is how many blocks before a breakpoint a cached prefix is
// looked for.
const lookback = 20

var promptCache struct {
	sync.Mutex
	seen map[[sha256.Size]byte]bool
}

// cacheUsage is the prompt's cache reads and writes, in tokens (a token
// per four bytes of content); it caches the prefixes at the breakpoints.
func cacheUsage(segments []segment) (read, write int) {
	h := sha256.New()
	sums := make([][sha256.Size]byte, len(segments))
	tokens := make([]int, len(segments))
	size, last := 0, -1
	for i, s := range segments {
		h.Write(s.content)
		h.Sum(sums[i][:0])
		size += len(s.content)
		tokens[i] = size / 4
		if s.marked {
			last = i
		}
	}
	if last < 0 {
		return 0, 0
	}
	promptCache.Lock()
	defer promptCache.Unlock()
	if promptCache.seen == nil {
		promptCache.seen = map[[sha256.Size]byte]bool{}
	}
	for b, s := range segments {
		if !s.marked {
			continue
		}
		for k := b; k >= max(0, b-lookback); k-- {
			if promptCache.seen[sums[k]] {
				read = max(read, tokens[k])
				break
			}
		}
	}
	for b, s := range segments {
		if s.marked {
			promptCache.seen[sums[b]] = true
		}
	}
	return read, max(0, tokens[last]-read)
}

// withoutMarker is a block's JSON without its cache_control, what the
// cache keys it by.
func withoutMarker(raw json.RawMessage) (content []byte, marked bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return raw, false
	}
	cc, marked := m["cache_control"]
	marked = marked && string(cc) != "null"
	delete(m, "cache_control")
	b, _ := json.Marshal(m)
	return b, marked
}

// anthropicSegments are a Messages request's blocks in cache order: its
// tools, its system prompt, its messages' content blocks.
func anthropicSegments(body []byte) []segment {
	var req struct {
		Tools    []json.RawMessage `json:"tools"`
		System   json.RawMessage   `json:"system"`
		Messages []struct {
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	json.Unmarshal(body, &req) //nolint:errcheck // a bad body has no segments
	var out []segment
	add := func(raw json.RawMessage) {
		var blocks []json.RawMessage
		if json.Unmarshal(raw, &blocks) != nil {
			out = append(out, segment{content: raw}) // a string
			return
		}
		for _, b := range blocks {
			content, marked := withoutMarker(b)
			out = append(out, segment{content: content, marked: marked})
		}
	}
	for _, t := range req.Tools {
		content, marked := withoutMarker(t)
		out = append(out, segment{content: content, marked: marked})
	}
	if len(req.System) > 0 {
		add(req.System)
	}
	for _, m := range req.Messages {
		add(m.Content)
	}
	return out
}

// converseSegments are a Converse request's blocks in cache order (tools,
// system, messages), a cache point marking the block before it.
func converseSegments(body []byte) []segment {
	var req struct {
		ToolConfig *struct {
			Tools []json.RawMessage `json:"tools"`
		} `json:"toolConfig"`
		System   []json.RawMessage `json:"system"`
		Messages []struct {
			Content []json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	json.Unmarshal(body, &req) //nolint:errcheck // a bad body has no segments
	var out []segment
	add := func(blocks []json.RawMessage) {
		for _, b := range blocks {
			var point struct {
				CachePoint json.RawMessage `json:"cachePoint"`
			}
			if json.Unmarshal(b, &point) == nil && point.CachePoint != nil {
				if n := len(out); n > 0 {
					out[n-1].marked = true
				}
				continue
			}
			out = append(out, segment{content: b})
		}
	}
	if req.ToolConfig != nil {
		add(req.ToolConfig.Tools)
	}
	add(req.System)
	for _, m := range req.Messages {
		add(m.Content)
	}
	return out
}
