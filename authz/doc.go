// Package authz holds accounts, API keys and the principals they
// authenticate as, the Store interface that persists them with the usage
// ledger, and the Authenticator that checks presented keys.
//
// Keys are high-entropy secrets shown once; only their SHA-256 is stored,
// with a short visible prefix for identification. Implementations of Store
// live in subpackages and pass the conformance suite in authz/storetest.
package authz
