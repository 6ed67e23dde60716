// Package telemetry sets up OpenTelemetry for the example programs: the sbotel adapter
// on a Prometheus endpoint (-metrics-addr) and a span printer (-spans). Without either
// flag the adapter runs on no-op providers and costs next to nothing.
package telemetry

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/attribute"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	sbotel "github.com/sbkit/sbkit/otel"
)

// Flags are the observability flags of a program.
type Flags struct {
	MetricsAddr string        // listen address of the Prometheus endpoint; "" for none
	Spans       bool          // print every span as JSON
	Hold        time.Duration // keep /metrics up this long after the work, for a scrape
}

// Register adds -metrics-addr, -spans and -metrics-hold to fs.
func (f *Flags) Register(fs *flag.FlagSet) {
	fs.StringVar(&f.MetricsAddr, "metrics-addr", "",
		"serve Prometheus metrics on this address at /metrics, e.g. 127.0.0.1:9464 (port 0: any free port)")
	fs.BoolVar(&f.Spans, "spans", false, "print every span (send, process, settle) as JSON")
	fs.DurationVar(&f.Hold, "metrics-hold", 0, "keep serving /metrics this long after the work is done, for a scrape")
}

// Setup is a running observability setup. Close it when done.
type Setup struct {
	// Telemetry makes the hooks for senders and processors.
	Telemetry *sbotel.Telemetry
	// MetricsURL is the Prometheus endpoint's URL; "" without -metrics-addr.
	MetricsURL string

	hold     time.Duration
	srv      *http.Server
	served   chan error
	tp       *sdktrace.TracerProvider
	mp       *sdkmetric.MeterProvider
	closeMu  sync.Mutex
	closed   chan struct{} // made by the first Close, closed when it is done
	closeErr error         // the first Close's result, read after closed
}

// Start starts what f asks for, for the program service (its service.name): the
// Prometheus endpoint (whose URL it prints on out) and the span printer (to out).
func Start(f Flags, service string, out io.Writer) (*Setup, error) {
	s := &Setup{hold: f.Hold}
	res := resource.NewSchemaless(attribute.String("service.name", service))
	opts := &sbotel.Options{
		TracerProvider: tracenoop.NewTracerProvider(),
		MeterProvider:  metricnoop.NewMeterProvider(),
		Propagator:     propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}),
	}
	if f.Spans {
		exp, err := stdouttrace.New(stdouttrace.WithWriter(out))
		if err != nil {
			return nil, err
		}
		s.tp = sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithResource(res))
		opts.TracerProvider = s.tp
	}
	if f.MetricsAddr != "" {
		reg := prometheus.NewRegistry()
		exp, err := otelprom.New(otelprom.WithRegisterer(reg))
		if err != nil {
			return nil, err
		}
		s.mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp), sdkmetric.WithResource(res))
		opts.MeterProvider = s.mp
		ln, err := net.Listen("tcp", f.MetricsAddr)
		if err != nil {
			return nil, fmt.Errorf("metrics: %w", err)
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		s.served = make(chan error, 1)
		go func() { s.served <- s.srv.Serve(ln) }()
		s.MetricsURL = "http://" + ln.Addr().String() + "/metrics"
		fmt.Fprintf(out, "metrics: %s\n", s.MetricsURL)
	}
	tel, err := sbotel.New(opts)
	if err != nil {
		_ = s.Close(context.Background())
		return nil, err
	}
	s.Telemetry = tel
	return s, nil
}

// Close waits for -metrics-hold (or for ctx to end), then stops the endpoint and flushes
// the span printer. Safe to call twice: a later Close waits for the first one until its
// own ctx ends, and returns the first one's result, or ctx's error.
func (s *Setup) Close(ctx context.Context) error {
	s.closeMu.Lock()
	if s.closed != nil {
		closed := s.closed
		s.closeMu.Unlock()
		select {
		case <-closed:
			return s.closeErr
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	s.closed = make(chan struct{})
	s.closeMu.Unlock()
	defer close(s.closed)
	s.closeErr = func() error {
		if s.srv != nil && s.hold > 0 {
			t := time.NewTimer(s.hold)
			select {
			case <-t.C:
			case <-ctx.Done():
			}
			t.Stop()
		}
		stop, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		var errs []error
		if s.srv != nil {
			errs = append(errs, s.srv.Shutdown(stop))
			if serveErr := <-s.served; !errors.Is(serveErr, http.ErrServerClosed) {
				errs = append(errs, serveErr)
			}
		}
		if s.tp != nil {
			errs = append(errs, s.tp.Shutdown(stop))
		}
		if s.mp != nil {
			errs = append(errs, s.mp.Shutdown(stop))
		}
		return errors.Join(errs...)
	}()
	return s.closeErr
}
