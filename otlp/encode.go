package otlp

import (
	"math"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/encoding/protowire"
)

// Field numbers of the OTLP protobuf messages (opentelemetry-proto:
// collector/trace/v1, trace/v1, common/v1, resource/v1).
const (
	requestResourceSpans = 1 // ExportTraceServiceRequest.resource_spans

	resourceSpansResource   = 1 // ResourceSpans.resource
	resourceSpansScopeSpans = 2 // ResourceSpans.scope_spans

	resourceAttrs = 1 // Resource.attributes

	scopeSpansScope     = 1 // ScopeSpans.scope
	scopeSpansSpans     = 2 // ScopeSpans.spans
	scopeSpansSchemaURL = 3 // ScopeSpans.schema_url

	scopeName       = 1 // InstrumentationScope.name
	scopeVersion    = 2 // InstrumentationScope.version
	scopeAttributes = 3 // InstrumentationScope.attributes

	spanTraceID       = 1
	spanSpanID        = 2
	spanTraceState    = 3
	spanParentSpanID  = 4
	spanName          = 5
	spanKind          = 6
	spanStart         = 7 // fixed64
	spanEnd           = 8 // fixed64
	spanAttributes    = 9
	spanDroppedAttrs  = 10
	spanEvents        = 11
	spanDroppedEvents = 12
	spanLinks         = 13
	spanDroppedLinks  = 14
	spanStatus        = 15
	spanFlags         = 16 // fixed32

	eventTime         = 1 // fixed64
	eventName         = 2
	eventAttributes   = 3
	eventDroppedAttrs = 4

	linkTraceID      = 1
	linkSpanID       = 2
	linkTraceState   = 3
	linkAttributes   = 4
	linkDroppedAttrs = 5
	linkFlags        = 6 // fixed32

	statusMessage = 2
	statusCode    = 3

	keyValueKey   = 1
	keyValueValue = 2

	anyString = 1
	anyBool   = 2
	anyInt    = 3
	anyDouble = 4 // fixed64
	anyArray  = 5
	anyKVList = 6
	anyBytes  = 7

	arrayValues  = 1 // ArrayValue.values, KeyValueList.values
	kvlistValues = 1

	// Span.flags: the W3C trace flags in the low byte, and whether the
	// parent (or linked span) is remote.
	flagHasIsRemote = 0x100
	flagIsRemote    = 0x200

	// Status.code
	statusOK    = 1
	statusError = 2
)

// encoder writes ExportTraceServiceRequest messages into one buffer it
// reuses.
type encoder struct {
	buf      []byte
	resource []attribute.KeyValue
	scopes   []*tracer // a batch's scopes, reused
}

// writer appends protobuf fields to b: each nested message after a
// one-byte length, moved up when its length needs more bytes. It lives on
// the encoding goroutine's stack, so that its appends need no GC write
// barrier.
type writer struct {
	b []byte
}

// request encodes the spans of batch as one ExportTraceServiceRequest;
// the result is valid until the next call.
func (enc *encoder) request(batch []*span) []byte {
	e := writer{b: enc.buf[:0]}
	defer func() { enc.buf = e.b }()
	rs := e.open(requestResourceSpans)
	r := e.open(resourceSpansResource)
	e.keyValues(resourceAttrs, enc.resource)
	e.close(r)
	enc.scopes = enc.scopes[:0]
	for _, s := range batch {
		if !containsTracer(enc.scopes, s.t) {
			enc.scopes = append(enc.scopes, s.t)
		}
	}
	for _, t := range enc.scopes {
		ss := e.open(resourceSpansScopeSpans)
		sc := e.open(scopeSpansScope)
		e.str(scopeName, t.scope.name)
		e.str(scopeVersion, t.scope.version)
		e.keyValues(scopeAttributes, t.scope.attrs)
		e.close(sc)
		for _, s := range batch {
			if s.t == t {
				e.span(s)
			}
		}
		e.str(scopeSpansSchemaURL, t.scope.schemaURL)
		e.close(ss)
	}
	e.close(rs)
	clear(enc.scopes)
	return e.b
}

func containsTracer(ts []*tracer, t *tracer) bool {
	for _, u := range ts {
		if u == t {
			return true
		}
	}
	return false
}

func (e *writer) span(s *span) {
	m := e.open(scopeSpansSpans)
	tid, sid := s.sc.TraceID(), s.sc.SpanID()
	e.bytes(spanTraceID, tid[:])
	e.bytes(spanSpanID, sid[:])
	if ts := s.sc.TraceState(); ts.Len() > 0 {
		e.str(spanTraceState, ts.String())
	}
	if s.parent.IsValid() {
		pid := s.parent.SpanID()
		e.bytes(spanParentSpanID, pid[:])
	}
	e.str(spanName, s.name)
	e.varint(spanKind, uint64(s.kind))
	e.fixed64(spanStart, uint64(s.start))
	e.fixed64(spanEnd, uint64(s.end))
	e.keyValues(spanAttributes, s.attrs)
	e.varint(spanDroppedAttrs, uint64(s.droppedAttrs))
	for _, ev := range s.events {
		m := e.open(spanEvents)
		e.fixed64(eventTime, uint64(ev.time))
		e.str(eventName, ev.name)
		e.keyValues(eventAttributes, ev.attrs)
		e.varint(eventDroppedAttrs, uint64(ev.dropped))
		e.close(m)
	}
	e.varint(spanDroppedEvents, uint64(s.droppedEvents))
	for _, l := range s.links {
		m := e.open(spanLinks)
		tid, sid := l.sc.TraceID(), l.sc.SpanID()
		e.bytes(linkTraceID, tid[:])
		e.bytes(linkSpanID, sid[:])
		if ts := l.sc.TraceState(); ts.Len() > 0 {
			e.str(linkTraceState, ts.String())
		}
		e.keyValues(linkAttributes, l.attrs)
		e.varint(linkDroppedAttrs, uint64(l.dropped))
		e.fixed32(linkFlags, flags(l.sc.TraceFlags(), l.sc))
		e.close(m)
	}
	e.varint(spanDroppedLinks, uint64(s.droppedLinks))
	if s.status != codes.Unset {
		m := e.open(spanStatus)
		e.str(statusMessage, s.statusMessage)
		code := uint64(statusOK)
		if s.status == codes.Error {
			code = statusError
		}
		e.varint(statusCode, code)
		e.close(m)
	}
	e.fixed32(spanFlags, flags(s.sc.TraceFlags(), s.parent))
	e.close(m)
}

// flags are a span's (or a link's) trace flags and whether the parent
// (the linked span) is remote.
func flags(f trace.TraceFlags, parent trace.SpanContext) uint32 {
	v := uint32(f) | flagHasIsRemote
	if parent.IsRemote() {
		v |= flagIsRemote
	}
	return v
}

func (e *writer) keyValues(field protowire.Number, kvs []attribute.KeyValue) {
	for _, kv := range kvs {
		m := e.open(field)
		e.str(keyValueKey, string(kv.Key))
		v := e.open(keyValueValue)
		e.value(kv.Value)
		e.close(v)
		e.close(m)
	}
}

// value writes the fields of an AnyValue. A value of a oneof is written
// even when it is zero (false, 0, ""), so that the receiver sees its type.
func (e *writer) value(v attribute.Value) {
	switch v.Type() {
	case attribute.BOOL:
		e.b = protowire.AppendTag(e.b, anyBool, protowire.VarintType)
		e.b = protowire.AppendVarint(e.b, protowire.EncodeBool(v.AsBool()))
	case attribute.INT64:
		e.b = protowire.AppendTag(e.b, anyInt, protowire.VarintType)
		e.b = protowire.AppendVarint(e.b, uint64(v.AsInt64()))
	case attribute.FLOAT64:
		e.b = protowire.AppendTag(e.b, anyDouble, protowire.Fixed64Type)
		e.b = protowire.AppendFixed64(e.b, math.Float64bits(v.AsFloat64()))
	case attribute.STRING:
		e.b = protowire.AppendTag(e.b, anyString, protowire.BytesType)
		e.b = protowire.AppendString(e.b, v.AsString())
	case attribute.BYTESLICE:
		e.b = protowire.AppendTag(e.b, anyBytes, protowire.BytesType)
		e.b = protowire.AppendBytes(e.b, v.AsByteSlice())
	case attribute.BOOLSLICE:
		array(e, v.AsBoolSlice(), attribute.BoolValue)
	case attribute.INT64SLICE:
		array(e, v.AsInt64Slice(), attribute.Int64Value)
	case attribute.FLOAT64SLICE:
		array(e, v.AsFloat64Slice(), attribute.Float64Value)
	case attribute.STRINGSLICE:
		array(e, v.AsStringSlice(), attribute.StringValue)
	case attribute.SLICE:
		array(e, v.AsSlice(), func(x attribute.Value) attribute.Value { return x })
	case attribute.MAP:
		a := e.open(anyKVList)
		e.keyValues(kvlistValues, v.AsMap())
		e.close(a)
	}
	// EMPTY: an AnyValue with no field set.
}

// array writes xs as an ArrayValue, each element as value makes it.
func array[T any](e *writer, xs []T, value func(T) attribute.Value) {
	a := e.open(anyArray)
	for _, x := range xs {
		e.element(value(x))
	}
	e.close(a)
}

// element writes one AnyValue of an ArrayValue.
func (e *writer) element(v attribute.Value) {
	m := e.open(arrayValues)
	e.value(v)
	e.close(m)
}

// open starts a nested message (a length-delimited field) and returns
// where its body starts, for close.
func (e *writer) open(field protowire.Number) int {
	e.b = protowire.AppendTag(e.b, field, protowire.BytesType)
	e.b = append(e.b, 0)
	return len(e.b)
}

// zeros pads the buffer when a length needs more than its one byte.
var zeros [10]byte

// close writes the length of the message opened at start.
func (e *writer) close(start int) {
	n := len(e.b) - start
	if n < 0x80 {
		e.b[start-1] = byte(n)
		return
	}
	extra := protowire.SizeVarint(uint64(n)) - 1
	e.b = append(e.b, zeros[:extra]...)
	copy(e.b[start+extra:], e.b[start:start+n])
	protowire.AppendVarint(e.b[:start-1], uint64(n))
}

func (e *writer) str(field protowire.Number, s string) {
	if s == "" {
		return
	}
	e.b = protowire.AppendTag(e.b, field, protowire.BytesType)
	e.b = protowire.AppendString(e.b, s)
}

func (e *writer) bytes(field protowire.Number, b []byte) {
	e.b = protowire.AppendTag(e.b, field, protowire.BytesType)
	e.b = protowire.AppendBytes(e.b, b)
}

func (e *writer) varint(field protowire.Number, v uint64) {
	if v == 0 {
		return
	}
	e.b = protowire.AppendTag(e.b, field, protowire.VarintType)
	e.b = protowire.AppendVarint(e.b, v)
}

func (e *writer) fixed64(field protowire.Number, v uint64) {
	if v == 0 {
		return
	}
	e.b = protowire.AppendTag(e.b, field, protowire.Fixed64Type)
	e.b = protowire.AppendFixed64(e.b, v)
}

func (e *writer) fixed32(field protowire.Number, v uint32) {
	if v == 0 {
		return
	}
	e.b = protowire.AppendTag(e.b, field, protowire.Fixed32Type)
	e.b = protowire.AppendFixed32(e.b, v)
}
