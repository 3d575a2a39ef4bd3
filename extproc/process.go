package extproc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"modelgate/extproc/guard"
	"modelgate/ratelimit"
	"modelgate/translate/providers"
)

// Process serves one ext_proc stream, which Envoy opens per HTTP request.
func (s *Server) Process(stream extprocv3.ExternalProcessor_ProcessServer) error {
	ctx := stream.Context()
	req, err := stream.Recv()
	if err != nil {
		return quietClose(err)
	}
	var p processor = s.newExchange()
	if a := s.upstreamAttempt(req); a != nil {
		p = s.newAttemptStream(a)
	}
	defer p.finish(ctx)
	for {
		resp, err := p.safeHandle(ctx, req)
		if err != nil {
			p.logger().Warn("protocol violation", zap.Error(err))
			return status.Error(codes.FailedPrecondition, err.Error())
		}
		withRequestID(resp, p.requestID())
		if resp.GetImmediateResponse() != nil {
			s.markGatewayReply(resp)
		}
		p.beforeSend(ctx)
		if ctx.Err() != nil { // Envoy ended the stream while the reply was made
			p.lost()
			return nil
		}
		if err := stream.Send(resp); err != nil {
			p.lost()
			return quietClose(err)
		}
		p.afterSend(ctx)
		if req, err = stream.Recv(); err != nil {
			return quietClose(err)
		}
	}
}

// processor answers the messages of one ext_proc stream: the
// router-level exchange, or an attempt of a Fallback model
// (attemptStream), told apart by the stream's first message.
type processor interface {
	safeHandle(ctx context.Context, req *extprocv3.ProcessingRequest) (*extprocv3.ProcessingResponse, error)
	// requestID is the gateway's id of the request, which its answers
	// carry; empty where they carry none.
	requestID() string
	// beforeSend and afterSend run around each reply, finish when the
	// stream ends.
	beforeSend(ctx context.Context)
	afterSend(ctx context.Context)
	// lost tells that the reply never reached Envoy.
	lost()
	finish(ctx context.Context)
	logger() *exchangeLog
}

// quietClose treats Envoy's normal ways of ending a stream as success:
// it half-closes and then resets the stream (ext_proc.cc, closeStream).
func quietClose(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, context.Canceled) || status.Code(err) == codes.Canceled {
		return nil
	}
	return err
}

// keepFailedCharges puts the Spender behind a ratelimit.Reconciler, unless
// it is one: a charge it fails to make (Redis down, or too slow) is kept
// and made once it answers again, before the next admission of its
// budgets and in Run. Without it, a charge lost to a counter that exists
// (a missing one is rebuilt from the ledger) stays lost for the period:
// a lost cost lets the subject spend it again, a lost refund refuses it
// early.
//
// Why not rebuild such a counter from the ledger instead: the counter
// also holds the reservations of requests in flight, on every replica,
// and the costs of requests the ledger has not written yet (within about
// 100 ms, or as long as the database fails), none of which the ledger
// knows. Setting the counter to the ledger's sum would drop them, and
// taking the greater of the two corrects nothing until the lost charges
// outweigh them. Charges only add to counters, so making the failed ones
// later is exact whatever ran meanwhile, on any replica.
func (s *Server) keepFailedCharges() error {
	if s.cfg.Spender == nil {
		return nil
	}
	if _, ok := s.cfg.Spender.(*ratelimit.Reconciler); ok {
		return nil
	}
	r, err := ratelimit.NewReconciler(s.cfg.Spender, ratelimit.ReconcilerConfig{
		Timeout: s.cfg.UsageTimeout,
		Alerted: func(alerts []ratelimit.Alert) { s.budgetAlerts(s.log, alerts) },
	})
	if err != nil {
		return fmt.Errorf("budgets: %w", err)
	}
	s.cfg.Spender = r
	return nil
}

// Run makes, until ctx ends, the budget charges the Spender failed to
// make, as soon as it answers again: other replicas sharing its counters
// then see them too. Without Run they are made only before the next
// admission of their budgets on this server. When ctx ends, Run tries
// once more, for up to UsageTimeout, and logs the charges it loses. It
// returns nil at once when no budgets are enforced.
func (s *Server) Run(ctx context.Context) error {
	r, ok := s.cfg.Spender.(*ratelimit.Reconciler)
	if !ok {
		return nil
	}
	err := r.Run(ctx)
	last, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.UsageTimeout)
	defer cancel()
	if rerr := r.Retry(last); rerr != nil {
		s.log.Error("budget charges lost: the budgets' store still fails", zap.Int("counters", r.Pending()), zap.Error(rerr))
	}
	return err
}

// New validates the config and returns a server.
func New(cfg Config, auth Authenticator, usage UsageRecorder) (*Server, error) {
	if auth == nil || usage == nil {
		return nil, errors.New("extproc: an authenticator and a usage recorder are required")
	}
	cfg = withDefaults(cfg)
	r, err := newRouter(cfg.Routing, cfg.Credentials, time.Now().Unix())
	if err != nil {
		return nil, fmt.Errorf("building routes: %w", err)
	}
	s := &Server{cfg: cfg, auth: auth, usage: usage, router: r, log: cfg.Logger, now: time.Now,
		providers: map[string]providers.Provider{}, secrets: providerSecrets(cfg.Credentials),
		requestRules: cfg.Guardrails.rules(guard.Request), responseRules: cfg.Guardrails.rules(guard.Response),
		guardCache: guard.NewCache(guardCacheSize, guardCacheTTL)}
	for _, r := range cfg.Guardrails.Rules {
		if r.Backend != nil && cfg.Metrics != nil {
			r.Backend.Observe = cfg.Metrics.observeGuardCall
		}
	}
	if err := s.keepFailedCharges(); err != nil {
		return nil, err
	}
	for _, b := range cfg.Routing.Backends {
		p, ok := providers.Lookup(b.Provider)
		if !ok {
			return nil, fmt.Errorf("backend %q: unsupported provider %q", b.Name, b.Provider)
		}
		s.providers[p.Name] = p
	}
	return s, nil
}
