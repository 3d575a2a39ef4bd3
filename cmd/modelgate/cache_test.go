package main

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A three-turn conversation with cache markers through the Anthropic and
// the Bedrock translators, against the scripted model, which caches as
// Anthropic documents prompt caching (cache points on Bedrock): the
// system prompt and the newest user message are marked, the marker moving
// to each new message as clients do. Turns 2 and 3 read from the cache:
// the client's usage shows it, the ledger records it, and the cost prices
// it at the cached price; the writes are recorded and priced at the
// cache write price, the system prompt's (marked for an hour) at the
// hour's.
func TestPromptCachingThreeTurns(t *testing.T) {
	a := startDev(t, func(string) string { return "" })
	system := strings.Repeat("You are a careful coding assistant who reads the repository before answering. ", 60)
	for _, model := range []string{"agent-claude", "agent-bedrock"} {
		t.Run(model, func(t *testing.T) {
			// 10 a million tokens in, 1 cached, 12.5 written to the cache
			// (20 for an hour), 10 out: costs tell them apart.
			if status, body := a.admin(t, "PUT", "/admin/v1/prices", `{"model":"`+model+`","input":"10","cached_input":"1","cache_write_input":"12.5","cache_write_1h_input":"20","output":"10"}`); status != 200 {
				t.Fatalf("price: %d %s", status, body)
			}
			marker := `{"type":"ephemeral","ttl":"1h"}`
			messages := []string{`{"role":"system","content":[{"type":"text","text":"` + system + `","cache_control":` + marker + `}]}`}
			var cached []int64
			for turn := 1; turn <= 3; turn++ {
				user := "Turn " + strconv.Itoa(turn) + " of " + model + ": what does main.go do?"
				msgs := append(append([]string{}, messages...), `{"role":"user","content":[{"type":"text","text":"`+user+`","cache_control":{"type":"ephemeral"}}]}`)
				status, body := a.call(t, "POST", "/chat/completions", a.APIKey, `{"model":"`+model+`","messages":[`+strings.Join(msgs, ",")+`]}`)
				if status != 200 {
					t.Fatalf("turn %d: %d %s", turn, status, body)
				}
				var cc struct {
					Usage struct {
						PromptTokens        int64 `json:"prompt_tokens"`
						PromptTokensDetails struct {
							CachedTokens int64 `json:"cached_tokens"`
						} `json:"prompt_tokens_details"`
					} `json:"usage"`
					Choices []struct {
						Message struct{ Content string }
					}
				}
				json.Unmarshal(body, &cc)
				cached = append(cached, cc.Usage.PromptTokensDetails.CachedTokens)
				if cc.Usage.PromptTokensDetails.CachedTokens > cc.Usage.PromptTokens {
					t.Errorf("turn %d: %d cached of %d prompt tokens", turn, cc.Usage.PromptTokensDetails.CachedTokens, cc.Usage.PromptTokens)
				}
				// The client sends the answer back, and its message unmarked.
				answer, _ := json.Marshal(cc.Choices[0].Message.Content)
				messages = append(messages, `{"role":"user","content":"`+user+`"}`, `{"role":"assistant","content":`+string(answer)+`}`)
			}
			t.Logf("cached tokens by turn: %v", cached)
			if cached[0] != 0 || cached[1] < int64(len(system)/4) || cached[2] <= cached[1] {
				t.Fatalf("cached tokens by turn %v: want none, then at least the system prompt's %d, then more", cached, len(system)/4)
			}
			// The ledger has each turn's cached tokens, priced at the cached price.
			var page struct {
				Data []struct {
					Model            string
					PromptTokens     int64   `json:"prompt_tokens"`
					CompletionTokens int64   `json:"completion_tokens"`
					CachedTokens     int64   `json:"cached_tokens"`
					CacheWriteTokens int64   `json:"cache_write_tokens"`
					CacheWrite1h     int64   `json:"cache_write_1h_tokens"`
					Cost             *string `json:"cost"`
				}
			}
			deadline := time.Now().Add(10 * time.Second)
			var got []int64
			for {
				_, body := a.admin(t, "GET", "/admin/v1/requests?limit=100", "")
				json.Unmarshal(body, &page)
				got = got[:0]
				for _, r := range page.Data {
					if r.Model == model {
						got = append([]int64{r.CachedTokens}, got...) // newest first
					}
				}
				if len(got) == 3 || time.Now().After(deadline) {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			if len(got) != 3 || got[0] != cached[0] || got[1] != cached[1] || got[2] != cached[2] {
				t.Fatalf("ledger cached tokens %v, want %v", got, cached)
			}
			writes, hour := int64(0), int64(0)
			for _, r := range page.Data {
				if r.Model != model || r.Cost == nil {
					continue
				}
				writes, hour = writes+r.CacheWriteTokens, hour+r.CacheWrite1h
				want := float64(r.PromptTokens-r.CachedTokens-r.CacheWriteTokens)*10e-6 + float64(r.CachedTokens)*1e-6 +
					float64(r.CacheWriteTokens-r.CacheWrite1h)*12.5e-6 + float64(r.CacheWrite1h)*20e-6 + float64(r.CompletionTokens)*10e-6
				if cost, err := strconv.ParseFloat(*r.Cost, 64); err != nil || cost < want*0.999 || cost > want*1.001 {
					t.Errorf("cost %s for %d prompt (%d cached, %d written, %d for an hour) and %d completion tokens, want %.9f",
						*r.Cost, r.PromptTokens, r.CachedTokens, r.CacheWriteTokens, r.CacheWrite1h, r.CompletionTokens, want)
				}
			}
			// The system prompt is written for an hour, the messages for five minutes.
			if hour < int64(len(system)/4) || writes <= hour {
				t.Errorf("%d cache writes recorded, %d for an hour; want at least the system prompt's %d for an hour, and more", writes, hour, len(system)/4)
			}
		})
	}
}
