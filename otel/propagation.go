package sbotel

import (
	"context"
	"encoding/hex"

	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Application property names that carry trace context.
const (
	// DiagnosticIDProperty is the property in which the Service Bus SDKs for .NET, Java
	// and Python carry a message's trace context, a W3C traceparent value (the .NET SDK
	// writes its Activity.Id, the others the traceparent of the message's span).
	DiagnosticIDProperty = "Diagnostic-Id"
	// TraceParentProperty and TraceStateProperty are the W3C Trace Context fields, which
	// the current SDKs write beside Diagnostic-Id and read before it.
	TraceParentProperty = "traceparent"
	TraceStateProperty  = "tracestate"
)

// propsCarrier is a message's ApplicationProperties as a TextMapCarrier. Only string
// values are read: a property of another type is not trace context.
type propsCarrier map[string]any

func (c propsCarrier) Get(key string) string {
	s, _ := c[key].(string)
	return s
}

func (c propsCarrier) Set(key, value string) { c[key] = value }

func (c propsCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

// diagnosticIDCarrier presents a Diagnostic-Id value as a traceparent field.
type diagnosticIDCarrier string

func (c diagnosticIDCarrier) Get(key string) string {
	if key == TraceParentProperty {
		return string(c)
	}
	return ""
}
func (diagnosticIDCarrier) Set(string, string) {}
func (diagnosticIDCarrier) Keys() []string     { return []string{TraceParentProperty} }

// w3c parses traceparent and tracestate whatever the configured propagator.
var w3c propagation.TraceContext

// extract returns the creation context that props carry, in the order the current Azure
// SDKs read it: the propagator's fields, then traceparent and tracestate, then
// Diagnostic-Id (unless disabled). ok is false when none holds a valid context. ctx's
// values are kept and the propagator's baggage, if any, is added to them.
func (t *Telemetry) extract(ctx context.Context, props map[string]any) (_ context.Context, sc trace.SpanContext, ok bool) {
	if len(props) == 0 {
		return ctx, sc, false
	}
	base := context.Background() // so that a context found is props', not ctx's
	ex := t.propagator.Extract(base, propsCarrier(props))
	if b := baggage.FromContext(ex); b.Len() > 0 {
		ctx = baggage.ContextWithBaggage(ctx, b)
	}
	if sc = trace.SpanContextFromContext(ex); sc.IsValid() {
		return ctx, sc, true
	}
	if _, found := props[TraceParentProperty]; found {
		if sc = trace.SpanContextFromContext(w3c.Extract(base, propsCarrier(props))); sc.IsValid() {
			return ctx, sc, true
		}
	}
	if !t.opts.DisableDiagnosticID {
		if id, _ := props[DiagnosticIDProperty].(string); id != "" {
			if sc = trace.SpanContextFromContext(w3c.Extract(base, diagnosticIDCarrier(id))); sc.IsValid() {
				return ctx, sc, true
			}
		}
	}
	return ctx, trace.SpanContext{}, false
}

// inject writes sc (the span of ctx) into props with the propagator, and as
// Diagnostic-Id unless disabled.
func (t *Telemetry) inject(ctx context.Context, sc trace.SpanContext, props map[string]any) {
	_, had := props[TraceParentProperty]
	t.propagator.Inject(ctx, propsCarrier(props))
	if !t.opts.DisableDiagnosticID {
		if tp, ok := props[TraceParentProperty].(string); ok && !had {
			props[DiagnosticIDProperty] = tp // the same value, written by the propagator
		} else {
			props[DiagnosticIDProperty] = traceparent(sc)
		}
	}
}

// traceparent formats sc as a W3C traceparent value (version 00).
func traceparent(sc trace.SpanContext) string {
	var b [55]byte
	tid, sid := sc.TraceID(), sc.SpanID()
	copy(b[:], "00-")
	hex.Encode(b[3:35], tid[:])
	b[35] = '-'
	hex.Encode(b[36:52], sid[:])
	b[52] = '-'
	flags := [1]byte{byte(sc.TraceFlags())}
	hex.Encode(b[53:55], flags[:])
	return string(b[:])
}
