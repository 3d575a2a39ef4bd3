package extproc

import (
	"io"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"modelgate/authz"
	"modelgate/translate"
)

// BenchmarkRequestLine is the "request done" line of a routed request,
// encoded as `modelgate serve` encodes it (zap's production JSON encoder,
// buffered) to nowhere.
func BenchmarkRequestLine(b *testing.B) {
	enc := zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())
	ws := &zapcore.BufferedWriteSyncer{WS: zapcore.AddSync(io.Discard), Size: 256 << 10, FlushInterval: time.Second}
	b.Cleanup(func() { ws.Stop() })
	requests := zap.New(zapcore.NewCore(enc, ws, zapcore.InfoLevel))
	s := &Server{cfg: withDefaults(Config{RequestLogger: requests}), log: zap.NewNop(), now: time.Now}
	u := translate.Usage{PromptTokens: 8, CompletionTokens: 377, TotalTokens: 385}
	p := &authz.Principal{KeyID: "key_0123456789abcdef", KeyPrefix: "sk-mg-AbCdEf", AccountID: "acct_0123456789abcdef"}
	b.ReportAllocs()
	for b.Loop() {
		var l exchangeLog
		l.init(s.log, requests)
		l.with(zap.String("request_id", "6b06b51a-0000-4000-8000-000000000006"), zap.String("account_id", p.AccountID),
			zap.String("provider", "openai"), zap.String("model", "gpt-4o"))
		o := outcome{start: time.Now(), status: 200, endpoint: endpointChat, principal: p, model: "gpt-4o", backend: "openai-main",
			routed: true, usage: u, end: time.Now(), cost: 3_790_000, costKnown: true}
		l.request(&o, s.cfg.RequestLogSample, s.cfg.Currency)
	}
}
