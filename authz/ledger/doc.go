// Package ledger is the usage ledger: what the gateway records of each
// request, and of the bodies payload capture keeps, and the writer that
// gets them to the store.
//
// The records are UsageRecord (one per request, and per failed attempt),
// summed as UsageTotals and reported as UsageRow by a UsageQuery,
// listed a page at a time by a RequestQuery; and Capture, an exchange's
// bodies. UsageStore and CaptureStore are the storage interfaces that keep
// them, which every authz.Store implements; ErrRefused is what their batch
// writes fail with when the store refuses a record for its content, and
// Storable makes a string one every store can keep.
//
// Ledger takes one usage record per request without blocking the request,
// and writes them to the store in batches, retrying failed writes whole.
// Payload captures go to the store the same way (Captures), the writer
// being generic in the record.
//
// The package imports no other of authz but pricing, so that authz.Store
// can embed its interfaces.
package ledger
