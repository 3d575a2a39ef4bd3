package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"modelgate/authz"
)

const keysUsage = `usage:
  modelgate keys create  --config F --account NAME [--name LABEL] [--models a,b]
  modelgate keys list    --config F [--account NAME]
  modelgate keys disable --config F KEY   (KEY is a key id or its visible prefix)
  modelgate keys enable  --config F KEY
  modelgate keys revoke  --config F KEY
`

func runKeys(ctx context.Context, args []string, e env) error {
	if len(args) == 0 {
		fmt.Fprint(e.stderr, keysUsage)
		return fmt.Errorf("keys: a subcommand is required")
	}
	fs := newFlags("keys "+args[0], e)
	path := fs.String("config", "", "configuration file (required)")
	account := fs.String("account", "", "account name")
	name := fs.String("name", "", "a label for the key")
	models := fs.String("models", "", "comma-separated model ids the key may use (default: all)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	cfg, err := loadConfig(*path)
	if err != nil {
		return err
	}
	store, err := openStore(ctx, cfg, cfg.Storage.SQLitePath, e.getenv)
	if err != nil {
		return err
	}
	defer store.Close()
	switch args[0] {
	case "create":
		return createKey(ctx, store, e, *account, *name, splitList(*models))
	case "list":
		return listKeys(ctx, store, e, *account)
	case "disable", "enable", "revoke":
		if fs.NArg() != 1 {
			return fmt.Errorf("keys %s: name exactly one key id or prefix", args[0])
		}
		return changeKey(ctx, store, e, args[0], fs.Arg(0))
	}
	fmt.Fprint(e.stderr, keysUsage)
	return fmt.Errorf("keys: unknown subcommand %q", args[0])
}

func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// ensureAccount returns the named account, creating it if needed.
func ensureAccount(ctx context.Context, store authz.Store, name string) (authz.Account, error) {
	a, err := store.AccountByName(ctx, name)
	if errors.Is(err, authz.ErrNotFound) {
		return store.CreateAccount(ctx, name)
	}
	return a, err
}

func createKey(ctx context.Context, store authz.Store, e env, account, name string, models []string) error {
	if account == "" {
		return fmt.Errorf("keys create: --account is required")
	}
	a, err := ensureAccount(ctx, store, account)
	if err != nil {
		return err
	}
	secret, k, err := authz.CreateKey(ctx, store, a.ID, name, models)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "%s\n", secret)
	fmt.Fprintf(e.stderr, "created key %s (prefix %s) for account %q; it is shown only once\n", k.ID, k.Prefix, a.Name)
	return nil
}

func listKeys(ctx context.Context, store authz.Store, e env, account string) error {
	if account == "" {
		return fmt.Errorf("keys list: --account is required")
	}
	a, err := store.AccountByName(ctx, account)
	if err != nil {
		return fmt.Errorf("account %q: %w", account, err)
	}
	keys, err := store.ListKeys(ctx, a.ID)
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tPREFIX\tNAME\tSTATE\tMODELS\tCREATED")
	for _, k := range keys {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", k.ID, k.Prefix, k.Name, keyState(k),
			strings.Join(k.Models, ","), k.CreatedAt.UTC().Format(time.RFC3339))
	}
	return w.Flush()
}

func keyState(k authz.Key) string {
	switch {
	case k.RevokedAt != nil:
		return "revoked"
	case k.Disabled:
		return "disabled"
	}
	return "active"
}

func changeKey(ctx context.Context, store authz.Store, e env, op, ref string) error {
	k, err := store.KeyByID(ctx, ref)
	if errors.Is(err, authz.ErrNotFound) {
		k, err = store.KeyByPrefix(ctx, ref)
	}
	if err != nil {
		return fmt.Errorf("key %q: %w", ref, err)
	}
	if op == "enable" && k.RevokedAt != nil {
		return fmt.Errorf("key %s (prefix %s) is revoked, which is final: create a new key", k.ID, k.Prefix)
	}
	switch op {
	case "disable", "enable":
		err = store.SetKeyDisabled(ctx, k.ID, op == "disable")
	case "revoke":
		err = store.RevokeKey(ctx, k.ID)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "key %s (prefix %s): %s\n", k.ID, k.Prefix, map[string]string{
		"disable": "disabled", "enable": "enabled", "revoke": "revoked"}[op])
	return nil
}
