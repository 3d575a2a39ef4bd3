// Package authz holds who may use the gateway and what it keeps about
// them: groups, accounts and API keys, with their model lists, limits and
// budgets; the principals keys authenticate as, and the Authenticator that
// checks presented keys (with a cache in front of the store); and the
// storage interfaces, one a concern.
//
// A key's access is the intersection of its group's, its account's and its
// own model lists, an empty list restricting nothing at its level; its
// limits are the account's overrides, else the group's. Keys are
// high-entropy secrets shown once; only their SHA-256 is stored, with a
// short visible prefix for identification.
//
// The storage interfaces are Accounts, Groups, Keys, Ledger (usage records
// and requests), Captures (payload captures), Prices (set at run time),
// Audit (admin changes), Responses (the Responses API's stored responses)
// and Images (generated images behind signed URLs). Store is all of them,
// what a backend implements; consumers take only the ones they use (the
// Authenticator a PrincipalStore, the admin an admin.Store).
//
// Subpackages:
//
//   - pricing: model prices, the cost of a request, and money in Nanos.
//   - ledger: the batching writer of usage records and captures to the store.
//   - admin: the admin API and web dashboard over the store.
//   - sqlite: the embedded Store, one SQLite file.
//   - postgres: the Store replicas share, in PostgreSQL.
//   - storetest: the conformance suite, one suite a storage interface, and
//     the store benchmarks.
package authz
