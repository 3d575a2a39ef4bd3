package main

import "testing"

// The captures waiting for the store take about the same memory whatever
// max_bytes is: the writer's own queue up to 64 KiB bodies, a shorter one
// beyond.
func TestCaptureQueueBoundedInBytes(t *testing.T) {
	for _, c := range []struct{ maxBytes, queue, batch int }{
		{64 << 10, 0, 0}, // the writer's defaults: 1,024 and 64
		{1 << 20, 64, 4},
		{16 << 20, 4, 1},
	} {
		got := captureQueue(c.maxBytes, nil)
		if got.QueueSize != c.queue || got.MaxBatch != c.batch {
			t.Errorf("max_bytes %d: queue %d, batch %d; want %d and %d", c.maxBytes, got.QueueSize, got.MaxBatch, c.queue, c.batch)
		}
		q := got.QueueSize
		if q == 0 {
			q = 1024
		}
		if q*2*c.maxBytes > captureQueueBytes {
			t.Errorf("max_bytes %d: %d captures take more than %d bytes", c.maxBytes, q, captureQueueBytes)
		}
	}
}
