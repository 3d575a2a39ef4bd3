package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"modelgate/authz"
	"modelgate/authz/ledger"
	"modelgate/cmd/modelgate/config"
	"modelgate/extproc"
)

// captureConfig is the ext_proc server's payload capture for the config,
// nil when off, and what closes its sink at shutdown. To: store queues
// captures for the store the way the usage ledger queues records (its
// metrics on reg), so a store outage delays them instead of losing them;
// closing writes what is queued, for at most ledgerFlushTimeout.
func captureConfig(cfg *config.Config, store authz.Store, reg prometheus.Registerer, log *zap.Logger) (*extproc.Capture, func() error, error) {
	c := cfg.Observability.Capture
	closeSink := func() error { return nil }
	var sink extproc.CaptureSink
	switch c.To {
	case "":
		return nil, closeSink, nil
	case "store":
		w, err := ledger.NewCaptures(store, reg, ledger.Config{Logger: log})
		if err != nil {
			return nil, nil, err
		}
		go w.Run(context.Background()) //nolint:errcheck // fails only if Close ran first
		sink, closeSink = w, func() error {
			ctx, cancel := context.WithTimeout(context.Background(), ledgerFlushTimeout)
			defer cancel()
			return w.Close(ctx)
		}
	case "file":
		f, err := os.OpenFile(c.File, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			return nil, nil, fmt.Errorf("observability.capture.file: %w", err)
		}
		sink, closeSink = &captureFile{f: f}, f.Close
	}
	out := &extproc.Capture{Sink: sink, MaxBytes: c.MaxBytes, Redact: extproc.Redaction{Members: c.Redact.Members}}
	for _, p := range c.Redact.Patterns {
		out.Redact.Patterns = append(out.Redact.Patterns, regexp.MustCompile(p)) // the config checked them
	}
	return out, closeSink, nil
}

// captureFile writes captures as JSON lines.
type captureFile struct {
	mu sync.Mutex
	f  *os.File
}

// captureLine is a capture in the file.
type captureLine struct {
	RequestID         string `json:"request_id"`
	At                string `json:"at"`
	AccountID         string `json:"account_id,omitempty"`
	KeyID             string `json:"key_id,omitempty"`
	Endpoint          string `json:"endpoint"`
	Model             string `json:"model,omitempty"`
	Status            int    `json:"status"`
	Request           string `json:"request"`
	Response          string `json:"response"`
	RequestTruncated  bool   `json:"request_truncated,omitempty"`
	ResponseTruncated bool   `json:"response_truncated,omitempty"`
}

// SaveCapture implements extproc.CaptureSink.
func (w *captureFile) SaveCapture(_ context.Context, c authz.Capture) error {
	line, err := json.Marshal(captureLine{c.RequestID, c.At.UTC().Format("2006-01-02T15:04:05.000Z07:00"), c.AccountID, c.KeyID,
		c.Endpoint, c.Model, c.Status, c.Request, c.Response, c.RequestTruncated, c.ResponseTruncated})
	if err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	_, err = w.f.Write(append(line, '\n'))
	return err
}
