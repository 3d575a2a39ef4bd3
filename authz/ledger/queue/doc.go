// Package queue is the usage ledger's writer: it takes one usage record
// per request without blocking the request, and writes them to the store
// in batches, retrying failed writes whole. Payload captures go to the
// store the same way (Captures), the writer being generic in the record.
//
// It is a package of its own, apart from the records of package ledger,
// so that extproc, which makes the records, depends only on the
// interfaces it defines (UsageRecorder, CaptureSink), never on this
// implementation: cmd/modelgate chooses it.
package queue
