package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"modelgate/authz"
	"modelgate/authz/admin"
)

const keysUsage = `usage: modelgate keys <subcommand> --config F [flags]

Manages the API keys clients send as "Authorization: Bearer <key>", in the
store the config names (storage.sqlite_path, or PostgreSQL through
storage.postgres_url_env). Only a key's hash is stored: its secret is
printed once, when it is created.

subcommands:
  create   create a key for an account and print its secret once
  list     list an account's keys: id, visible prefix, name, state, models,
           guardrails
  disable  refuse a key until it is enabled again
  enable   accept a disabled key again
  revoke   refuse a key for good

Run 'modelgate keys <subcommand> --help' for its flags and an example.

example:
  modelgate keys create --config modelgate.yaml --account acme
  modelgate keys list --config modelgate.yaml --account acme
  modelgate keys revoke --config modelgate.yaml sk-mg-AbCdEf
`

// keysHelp is each keys subcommand's help.
var keysHelp = map[string]cmdHelp{
	"create": {
		synopsis: "modelgate keys create --config F --account NAME [--name LABEL] [--models a,b] [--guardrails a,b]",
		about: `Creates an API key for an account, creating the account if needed, and prints
its secret on stdout. Only its hash is stored, so this is the only time the
secret is shown; the key's id and visible prefix go to stderr. --guardrails
names optional guardrail rules of the config to run on the key's requests
besides those that always run; the gateway ignores names it does not have.`,
		example: "modelgate keys create --config modelgate.yaml --account acme --name ci --models gpt-4o,gpt-4o-mini --guardrails pii",
	},
	"list": {
		synopsis: "modelgate keys list --config F --account NAME",
		about:    "Lists an account's keys: id, visible prefix, name, state, models, guardrails and\ncreation time. Secrets are never shown.",
		example:  "modelgate keys list --config modelgate.yaml --account acme",
	},
	"disable": {
		synopsis: "modelgate keys disable --config F KEY",
		about:    "Disables a key: requests with it get 403 until it is enabled again.\nKEY is the key's id or its visible prefix (as keys list shows them).",
		example:  "modelgate keys disable --config modelgate.yaml sk-mg-AbCdEf",
	},
	"enable": {
		synopsis: "modelgate keys enable --config F KEY",
		about:    "Enables a disabled key again. A revoked key cannot be enabled.\nKEY is the key's id or its visible prefix (as keys list shows them).",
		example:  "modelgate keys enable --config modelgate.yaml sk-mg-AbCdEf",
	},
	"revoke": {
		synopsis: "modelgate keys revoke --config F KEY",
		about:    "Revokes a key for good: requests with it get 401 and it cannot be enabled again.\nKEY is the key's id or its visible prefix (as keys list shows them).",
		example:  "modelgate keys revoke --config modelgate.yaml sk-mg-AbCdEf",
	},
}

func runKeys(ctx context.Context, args []string, e env) error {
	if len(args) == 0 {
		fmt.Fprint(e.stderr, keysUsage)
		return fmt.Errorf("keys: a subcommand is required")
	}
	sub := args[0]
	switch sub {
	case "-h", "--help", "-help":
		fmt.Fprint(e.stdout, keysUsage)
		return errHelpShown
	case "help": // modelgate keys help [create]
		if len(args) > 1 {
			return runKeys(ctx, []string{args[1], "--help"}, e)
		}
		fmt.Fprint(e.stdout, keysUsage)
		return errHelpShown
	}
	h, ok := keysHelp[sub]
	if !ok {
		fmt.Fprint(e.stderr, keysUsage)
		return fmt.Errorf("keys: unknown subcommand %q", sub)
	}
	c := newCommand("keys "+sub, e, h)
	path := c.String("config", "", "`F` the configuration file; its storage section names the store (required)")
	var account, name, models, guardrails *string
	switch sub {
	case "create":
		account = c.String("account", "", "`NAME` the account the key belongs to, created if needed (required)")
		name = c.String("name", "", "`LABEL` a label for the key, shown by keys list and the dashboard")
		models = c.String("models", "", "`a,b` the model ids the key may use (default: all the account may use)")
		guardrails = c.String("guardrails", "", "`a,b` optional guardrail rules of the config the key adds, by name (default: none)")
	case "list":
		account = c.String("account", "", "`NAME` the account whose keys to list (required)")
	}
	if err := c.parse(args[1:]); err != nil {
		return err
	}
	if err := c.require("config", *path); err != nil {
		return err
	}
	if account != nil {
		if err := c.require("account", *account); err != nil {
			return err
		}
		if err := c.noArgs(); err != nil {
			return err
		}
	} else if c.NArg() != 1 {
		return c.usageError("name exactly one key id or prefix")
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
	switch sub {
	case "create":
		return createKey(ctx, store, e, authz.Key{Name: *name, Models: splitList(*models), Guardrails: splitList(*guardrails)}, *account)
	case "list":
		return listKeys(ctx, store, e, *account)
	}
	return changeKey(ctx, store, e, sub, c.Arg(0))
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

// ensureAccount returns the named account, creating it if needed, and
// whether it did.
func ensureAccount(ctx context.Context, store authz.Accounts, name string) (authz.Account, bool, error) {
	a, err := store.AccountByName(ctx, name)
	if errors.Is(err, authz.ErrNotFound) {
		a, err = store.CreateAccount(ctx, name)
		return a, err == nil, err
	}
	return a, false, err
}

// audit records a change the command made in the audit log, as the admin
// API records its own. The change is made already: a failure to record it
// is reported, not returned.
func audit(ctx context.Context, store authz.Audit, e env, action, target string, before, after any) {
	if err := admin.AuditCommand(ctx, store, time.Now(), action, target, before, after); err != nil {
		fmt.Fprintf(e.stderr, "warning: %s %s is not in the audit log: %v\n", action, target, err)
	}
}

// createKey issues k (its name, models and guardrails) for the named
// account.
func createKey(ctx context.Context, store authz.Store, e env, k authz.Key, account string) error {
	if account == "" {
		return fmt.Errorf("keys create: --account is required")
	}
	var err error
	if k.Guardrails, err = authz.CleanGuardrails(k.Guardrails); err != nil {
		return fmt.Errorf("keys create: --guardrails: %w", err)
	}
	a, created, err := ensureAccount(ctx, store, account)
	if err != nil {
		return err
	}
	if created {
		audit(ctx, store, e, "account.create", a.ID, nil, a)
	}
	k.AccountID = a.ID
	secret, k, err := authz.IssueKey(ctx, store, k)
	if err != nil {
		return err
	}
	audit(ctx, store, e, "key.create", k.ID, nil, k)
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
	fmt.Fprintln(w, "ID\tPREFIX\tNAME\tSTATE\tMODELS\tGUARDRAILS\tCREATED")
	for _, k := range keys {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", k.ID, k.Prefix, k.Name, keyState(k),
			strings.Join(k.Models, ","), strings.Join(k.Guardrails, ","), k.CreatedAt.UTC().Format(time.RFC3339))
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
	action := "key.update"
	switch op {
	case "disable", "enable":
		err = store.SetKeyDisabled(ctx, k.ID, op == "disable")
	case "revoke":
		action = "key.revoke"
		err = store.RevokeKey(ctx, k.ID)
	}
	if err != nil {
		return err
	}
	var after any // the key as it is now; nil when it cannot be read back
	if now, err := store.KeyByID(ctx, k.ID); err == nil {
		after = now
	}
	audit(ctx, store, e, action, k.ID, k, after)
	fmt.Fprintf(e.stdout, "key %s (prefix %s): %s\n", k.ID, k.Prefix, map[string]string{
		"disable": "disabled", "enable": "enabled", "revoke": "revoked"}[op])
	return nil
}
