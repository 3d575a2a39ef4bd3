package extproc

import (
	"sync"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// exchangeLog is an exchange's logger. The fields naming the exchange
// (request, account, provider, model) are kept as they come and encoded
// only into lines that are written: zap's With would encode each at once,
// a cost every request paid for lines most never log.
type exchangeLog struct {
	base     *zap.Logger
	requests *zap.Logger // for the line that ends a request
	fields   []zap.Field
	buf      [6]zap.Field // room for the usual fields, in the exchange itself
}

func (l *exchangeLog) init(base, requests *zap.Logger) {
	l.base, l.requests = base, requests
	l.fields = l.buf[:0]
}

// with names the exchange further in every later line.
func (l *exchangeLog) with(fs ...zap.Field) { l.fields = append(l.fields, fs...) }

func (l *exchangeLog) write(lvl zapcore.Level, msg string, fs []zap.Field) {
	l.writeTo(l.base, lvl, msg, fs)
}

func (l *exchangeLog) writeTo(to *zap.Logger, lvl zapcore.Level, msg string, fs []zap.Field) {
	ce := to.Check(lvl, msg)
	if ce == nil {
		return
	}
	all := make([]zap.Field, 0, len(l.fields)+len(fs))
	ce.Write(append(append(all, l.fields...), fs...)...)
}

func (l *exchangeLog) Debug(msg string, fs ...zap.Field) { l.write(zapcore.DebugLevel, msg, fs) }
func (l *exchangeLog) Warn(msg string, fs ...zap.Field)  { l.write(zapcore.WarnLevel, msg, fs) }
func (l *exchangeLog) Error(msg string, fs ...zap.Field) { l.write(zapcore.ErrorLevel, msg, fs) }

// requestFields recycles the slices of request lines: one a request
// would be a kilobyte of garbage each.
var requestFields = sync.Pool{New: func() any { return new([]zap.Field) }}

// requestLine is the line a request ends with, when its level is on
// (nil otherwise), and the fields naming the exchange, to which it
// appends its own before writeRequest writes them.
func (l *exchangeLog) requestLine(msg string) (*zapcore.CheckedEntry, *[]zap.Field) {
	ce := l.requests.Check(zapcore.InfoLevel, msg)
	if ce == nil {
		return nil, nil
	}
	fs := requestFields.Get().(*[]zap.Field)
	*fs = append((*fs)[:0], l.fields...)
	return ce, fs
}

// writeRequest writes the line and recycles its fields: the encoder is
// done with them once Write returns.
func writeRequest(ce *zapcore.CheckedEntry, fs *[]zap.Field) {
	ce.Write(*fs...)
	clear(*fs) // let go of what the fields point to
	requestFields.Put(fs)
}
