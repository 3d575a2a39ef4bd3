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

	"modelgate/authz/ledger"
	"modelgate/authz/ledger/queue"
	"modelgate/extproc"
	"modelgate/extproc/config"
	"modelgate/extproc/redact"
)

// captureConfig is the ext_proc server's payload capture for the config,
// nil when off, and its sink to run and close. To: store queues captures
// for store off the request path, with the queue's metrics on reg.
func captureConfig(cfg *config.Config, store ledger.CaptureStore, reg prometheus.Registerer, log *zap.Logger) (*extproc.Capture, captureSink, error) {
	c := cfg.Observability.Capture
	var sink extproc.CaptureSink
	var out captureSink
	switch c.To {
	case "":
		return nil, out, nil
	case "store":
		q, err := queue.NewCaptures(store, reg, captureQueue(c.MaxBytes, log))
		if err != nil {
			return nil, out, err
		}
		sink, out.queue = q, q
	case "file":
		f, err := os.OpenFile(c.File, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			return nil, out, fmt.Errorf("observability.capture.file: %w", err)
		}
		sink, out.closeFile = &captureFile{f: f}, f.Close
	}
	capture := &extproc.Capture{Sink: sink, MaxBytes: c.MaxBytes, Redact: redact.Rules{Members: c.Redact.Members}}
	for _, p := range c.Redact.Patterns {
		capture.Redact.Patterns = append(capture.Redact.Patterns, regexp.MustCompile(p)) // the config checked them
	}
	return capture, out, nil
}

// captureQueueBytes is about the most the captures waiting for the store
// may take: 1024 captures (queue.Captures' queue) of two 64 KiB bodies
// (the default max_bytes), and the batch being written.
const captureQueueBytes = 128 << 20

// captureQueue is the capture writer's config for bodies of up to
// maxBytes: its default queue up to 64 KiB, a shorter one beyond, so that
// a store outage costs the gateway no more memory with larger bodies
// (at the largest max_bytes, 16 MiB, 4 captures wait).
func captureQueue(maxBytes int, log *zap.Logger) queue.Config {
	cfg := queue.Config{Logger: log}
	if maxBytes > 64<<10 {
		n := max(captureQueueBytes/(2*maxBytes), 1)
		cfg.QueueSize, cfg.MaxBatch = n, max(n/16, 1) // the default's proportions, 1024 and 64
	}
	return cfg
}

// captureSink is where the gateway's captures go, as attach runs it and
// drain closes it: a queue to the store, or a file.
type captureSink struct {
	queue     *queue.Captures // to: store
	closeFile func() error    // to: file
}

// run writes the queued captures until close.
func (s captureSink) run() {
	if s.queue != nil {
		// Not a request's context: the queue takes the captures of the
		// requests drain waits for, until close.
		go s.queue.Run(context.Background()) //nolint:errcheck // fails only if close came first
	}
}

// close writes the captures still queued, until ctx ends, and closes the
// file.
func (s captureSink) close(ctx context.Context) error {
	if s.queue != nil {
		return s.queue.Close(ctx)
	}
	if s.closeFile != nil {
		return s.closeFile()
	}
	return nil
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
func (w *captureFile) SaveCapture(_ context.Context, c ledger.Capture) error {
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
