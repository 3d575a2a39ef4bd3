// Package authz holds who may use the gateway and what it keeps about
// them: groups, accounts and API keys, with their model lists, limits,
// budgets and the guardrail rules they add; the principals keys
// authenticate as, and the Authenticator that checks presented keys (with
// a cache in front of the store); and Store, the storage interfaces of all
// it keeps, one a concern.
//
// A key's access is the intersection of its group's, its account's and its
// own model lists, an empty list restricting nothing at its level; its
// limits are the account's overrides, else the group's; the optional
// guardrail rules that run on its requests are the union of the three
// levels' lists. Keys are
// high-entropy secrets shown once; only their SHA-256 is stored, with a
// short visible prefix for identification.
//
// Its storage interfaces are Accounts, Groups, Keys, Prices (set at run
// time) and Audit (admin changes). The others live with what they hold:
// ledger.UsageStore (usage records and requests) and ledger.CaptureStore
// (payload captures) in package ledger, state.Responses (the Responses
// API's stored responses) and state.Images (generated images behind signed
// URLs) in package state. Store is all nine, what a backend implements;
// consumers take only the ones they use (the Authenticator a
// PrincipalStore, the admin an admin.Store). ErrNotFound and ErrExists are
// what every store returns, for all nine.
//
// Subpackages:
//
//   - pricing: model prices, the cost of a request, and money in Nanos.
//   - ledger: the usage ledger's records and captures, and their storage
//     interfaces; ledger/queue, the batching writer of both to the store.
//   - state: what the gateway keeps for clients between requests, stored
//     responses and generated images, and their storage interfaces.
//   - admin: the admin API and web dashboard over the store.
//   - sqlite: the embedded Store, one SQLite file.
//   - postgres: the Store replicas share, in PostgreSQL.
//   - storetest: the conformance suite, one suite a storage interface, and
//     the store benchmarks.
package authz
