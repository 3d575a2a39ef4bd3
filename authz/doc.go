// Package authz holds groups, accounts, API keys and the principals they
// authenticate as, the Store interface that persists them with the usage
// ledger and response state, and the Authenticator that checks presented
// keys.
//
// A key's access is the intersection of its group's, its account's and its
// own model lists, an empty list restricting nothing at its level; its
// limits are the account's overrides, else the group's. Keys are
// high-entropy secrets shown once; only their SHA-256 is stored, with a
// short visible prefix for identification. Implementations of Store live in
// subpackages (sqlite, the embedded default; postgres, shared by replicas)
// and pass the conformance suite in authz/storetest.
package authz
