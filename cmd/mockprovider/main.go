// Command mockprovider is an upstream that answers like OpenAI by replaying
// recorded traffic; see package replay for the scenarios.
package main

import (
	"context"
	"errors"
	"flag"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.uber.org/zap"

	"modelgate/cmd/mockprovider/replay"
	"modelgate/testdata"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:9090", "address to listen on")
	apiKey := flag.String("api-key", os.Getenv("MOCK_API_KEY"), "required bearer key (default $MOCK_API_KEY; empty accepts any)")
	chunk := flag.Int("chunk-size", 0, "bytes per stream write (0: one SSE event per write)")
	delay := flag.Duration("delay", 0, "pause between stream writes")
	flag.Parse()
	log, _ := zap.NewProduction()
	mock, err := replay.New(replay.Config{Recordings: testdata.Recordings, APIKey: *apiKey, ChunkSize: *chunk, Delay: *delay})
	if err != nil {
		log.Fatal("starting", zap.Error(err))
	}
	srv := &http.Server{Addr: *listen, Handler: mock, ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(shutdown) //nolint:errcheck // exiting anyway
	}()
	log.Info("mock provider listening", zap.String("addr", *listen))
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		log.Fatal("serving", zap.Error(err))
	}
}
