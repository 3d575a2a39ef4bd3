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
// breakpoint. A breakpoint with a ttl of 1h writes for an hour: as
// Anthropic requires, longer-lived breakpoints come first, so the hour's
// writes are those up to the last 1h breakpoint.

// segment is a block of the prompt: its content, and whether a breakpoint
// follows it, and whether that breakpoint's ttl is an hour.
type segment struct {
	content []byte
	marked  bool
	hour    bool
}

// cacheCounts are a prompt's cache reads and writes in tokens; Write1h
// of the writes are for an hour.
type cacheCounts struct {
	Read, Write, Write1h int
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
func cacheUsage(segments []segment) cacheCounts {
	h := sha256.New()
	sums := make([][sha256.Size]byte, len(segments))
	tokens := make([]int, len(segments))
	size, last, lastHour := 0, -1, -1
	for i, s := range segments {
		h.Write(s.content)
		h.Sum(sums[i][:0])
		size += len(s.content)
		tokens[i] = size / 4
		if s.marked {
			last = i
		}
		if s.marked && s.hour {
			lastHour = i
		}
	}
	if last < 0 {
		return cacheCounts{}
	}
	read := 0
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
	c := cacheCounts{Read: read, Write: max(0, tokens[last]-read)}
	if lastHour >= 0 {
		c.Write1h = max(0, tokens[lastHour]-read)
	}
	return c
}

// withoutMarker is a block's segment: its JSON without its cache_control,
// what the cache keys it by.
func withoutMarker(raw json.RawMessage) segment {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return segment{content: raw}
	}
	cc, marked := m["cache_control"]
	delete(m, "cache_control")
	b, _ := json.Marshal(m)
	return segment{content: b, marked: marked && string(cc) != "null", hour: hourLong(cc)}
}

// hourLong reports whether a cache marker (cache_control or a cache
// point) lives for an hour.
func hourLong(marker json.RawMessage) bool {
	var m struct {
		TTL string `json:"ttl"`
	}
	return json.Unmarshal(marker, &m) == nil && m.TTL == "1h"
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
			out = append(out, withoutMarker(b))
		}
	}
	for _, t := range req.Tools {
		out = append(out, withoutMarker(t))
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
					out[n-1].marked, out[n-1].hour = true, hourLong(point.CachePoint)
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
