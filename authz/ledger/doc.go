// Package ledger is the usage ledger: what the gateway records of each
// request, and the bodies payload capture keeps, as the stores keep them.
//
// The records are UsageRecord (one per request, and per failed attempt),
// summed as UsageTotals and reported as UsageRow by a UsageQuery,
// listed a page at a time by a RequestQuery; and Capture, an exchange's
// bodies. UsageStore and CaptureStore are the storage interfaces that keep
// them, which every authz.Store implements; ErrRefused is what their batch
// writes fail with when the store refuses a record for its content, and
// Storable makes a string one every store can keep.
//
// The package imports no other of authz but pricing, so that authz.Store
// can embed its interfaces. The writer that takes the records off the
// request path and stores them in batches is its subpackage queue, apart
// so that extproc, which uses the records, never depends on it.
package ledger
