package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// browserPath is Debian's Chromium, which the browser test drives.
const browserPath = "/usr/bin/chromium"

// browserResult is what testdata/browser/dashboard.mjs reports.
type browserResult struct {
	AccountID         string   `json:"accountId"`
	Secret            string   `json:"secret"`
	ShownOnceWarning  bool     `json:"shownOnceWarning"`
	CopyButton        string   `json:"copyButton"`
	ClipboardMatches  bool     `json:"clipboardMatches"`
	SecretShownAgain  bool     `json:"secretShownAgain"`
	PrefixListed      bool     `json:"prefixListed"`
	ChatStatus        int      `json:"chatStatus"`
	ChatContent       string   `json:"chatContent"`
	UsageRow          []string `json:"usageRow"`
	ChartBars         int      `json:"chartBars"`
	StateAfterRevoke  string   `json:"stateAfterRevoke"`
	StatusAfterRevoke int      `json:"statusAfterRevoke"`
	ErrorAfterRevoke  string   `json:"errorAfterRevoke"`

	PriceRow          []string   `json:"priceRow"`
	SpenderID         string     `json:"spenderId"`
	SecretAfterReload bool       `json:"secretAfterReload"`
	SpenderKeys       int        `json:"spenderKeys"`
	BudgetRefusal     string     `json:"budgetRefusal"`
	TypedKept         string     `json:"typedKept"`
	EffectiveBudget   string     `json:"effectiveBudget"`
	SpendStatuses     []int      `json:"spendStatuses"`
	RefusalCode       string     `json:"refusalCode"`
	RefusalMessage    string     `json:"refusalMessage"`
	SpendRow          []string   `json:"spendRow"`
	BudgetRow         []string   `json:"budgetRow"`
	Audit             [][]string `json:"audit"`
	DisableDialog     string     `json:"disableDialog"`
	KeyStateDisabled  bool       `json:"keyStateDisabled"`
	Narrow            map[string]struct {
		Width, Nav float64
	} `json:"narrow"`
	Screenshots struct {
		Key, Chart, Usage, Spend, Narrow string
	} `json:"screenshots"`
}

// The dashboard in a real browser, end to end through `modelgate dev`:
// sign in, create an account and a key, see the key once, use it, find
// the request in the usage view, revoke the key and get 401 with it. Then
// spend: set a price, set a monthly budget on an account, spend it through
// the gateway, get the 429 insufficient_quota, see the spending on the
// usage page and the changes in the audit log; disabling the account asks
// first; and at 390 pixels wide nothing is wider than the screen.
func TestDashboardInBrowser(t *testing.T) {
	dir, _ := filepath.Abs(filepath.Join("testdata", "browser"))
	node, nodeErr := exec.LookPath("node")
	_, browserErr := os.Stat(browserPath)
	_, moduleErr := os.Stat(filepath.Join(dir, "node_modules", "playwright-core", "package.json"))
	if err := errors.Join(nodeErr, browserErr, moduleErr); err != nil {
		if os.Getenv("MODELGATE_TEST_BROWSER") != "" {
			t.Fatalf("MODELGATE_TEST_BROWSER is set but the browser test cannot run: %v", err)
		}
		t.Skipf("skipping: needs node, Chromium at %s (apt-get install chromium) and `npm ci` in %s: %v", browserPath, dir, err)
	}
	artifacts := os.Getenv("MODELGATE_TEST_ARTIFACTS")
	if artifacts == "" {
		artifacts = t.TempDir()
	} else if err := os.MkdirAll(artifacts, 0o755); err != nil {
		t.Fatal(err)
	}
	a := startDev(t, func(string) string { return "" })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "dashboard.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "MODELGATE_ADMIN_URL="+a.Admin, "MODELGATE_ADMIN_TOKEN="+a.AdminToken,
		"MODELGATE_BASE_URL="+a.Gateway, "MODELGATE_ARTIFACTS="+artifacts, "CHROMIUM="+browserPath)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node dashboard.mjs: %v\n%s", err, stderr.Bytes())
	}
	var r browserResult
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("dashboard.mjs printed %q: %v", out, err)
	}
	t.Logf("screenshots: key page %s, usage chart %s, usage page %s, spending %s, 390px %s", r.Screenshots.Key, r.Screenshots.Chart,
		r.Screenshots.Usage, r.Screenshots.Spend, r.Screenshots.Narrow)

	if !strings.HasPrefix(r.Secret, "sk-mg-") || !r.ShownOnceWarning || r.SecretShownAgain || !r.PrefixListed {
		t.Errorf("key display: secret %.12q…, warning %v, shown again %v, prefix listed %v", r.Secret, r.ShownOnceWarning, r.SecretShownAgain, r.PrefixListed)
	}
	if r.CopyButton != "Copied" || !r.ClipboardMatches {
		t.Errorf("copy button: %q, clipboard holds the key: %v", r.CopyButton, r.ClipboardMatches)
	}
	if r.ChatStatus != 200 || !strings.HasPrefix(r.ChatContent, "Hi there!") {
		t.Errorf("chat completion with the new key: %d %q", r.ChatStatus, r.ChatContent)
	}
	// One row per day, key and model: the day, "prefix… name", the model,
	// then 1 request, succeeded, none refused or failed, the recording's
	// 385 tokens among the sums, no web searches, and its cost: the dev
	// config has no prices.
	if len(r.UsageRow) != 14 || r.UsageRow[1] != r.Secret[:12]+"… browser key" || r.UsageRow[2] != "gpt-4o-mini" ||
		r.UsageRow[3] != "1" || r.UsageRow[4] != "1" || r.UsageRow[5] != "0" || r.UsageRow[9] != "385" || r.UsageRow[12] != "0" ||
		r.UsageRow[13] != "no price" {
		t.Errorf("usage row = %q", r.UsageRow)
	}
	if r.ChartBars != 30 {
		t.Errorf("the chart has %d bars, want one per day of the last 30", r.ChartBars)
	}
	if r.StateAfterRevoke != "revoked" || r.StatusAfterRevoke != 401 || r.ErrorAfterRevoke != "invalid_api_key" {
		t.Errorf("after revoking: page says %q, gateway answers %d %q", r.StateAfterRevoke, r.StatusAfterRevoke, r.ErrorAfterRevoke)
	}
	checkSpendInBrowser(t, r)
	for _, p := range []string{r.Screenshots.Key, r.Screenshots.Chart, r.Screenshots.Usage, r.Screenshots.Spend, r.Screenshots.Narrow} {
		if b, err := os.ReadFile(p); err != nil || !bytes.HasPrefix(b, []byte("\x89PNG")) {
			t.Errorf("screenshot %s: %v", p, err)
		}
	}

	// The admin API agrees with what the browser saw.
	var usage struct {
		Data []struct {
			Model       string `json:"model"`
			Requests    int64  `json:"requests"`
			TotalTokens int64  `json:"total_tokens"`
		} `json:"data"`
	}
	adminGet(t, a, "/admin/v1/usage?by=model&account_id="+r.AccountID, &usage)
	if len(usage.Data) != 1 || usage.Data[0].Model != "gpt-4o-mini" || usage.Data[0].Requests != 1 || usage.Data[0].TotalTokens != 385 {
		t.Errorf("usage of the account = %+v", usage.Data)
	}
}

// adminGet calls the admin API of a dev gateway and decodes its answer.
func adminGet(t *testing.T, a devAddrs, path string, out any) {
	t.Helper()
	status, body := a.admin(t, "GET", path, "")
	if status != 200 {
		t.Fatalf("GET %s: %d %s", path, status, body)
	}
	if err := json.Unmarshal(body, out); err != nil {
		t.Fatalf("GET %s: %v in %s", path, err, body)
	}
}

// `modelgate dev` prints the dashboard's URL and how to sign in: a token
// it made (shown once), or the variable it took one from.
func TestDevAnnouncesDashboard(t *testing.T) {
	for _, tc := range []struct {
		name, envToken string
		wantErr        string
	}{
		{name: "made by dev"},
		{name: "from the environment", envToken: "env-admin-token-0123456789abcdefghij"},
		{name: "too short", envToken: "short", wantErr: "at least 32 characters"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var out syncBuffer
			ready, done := make(chan devAddrs, 1), make(chan error, 1)
			getenv := func(name string) string {
				if name == "MODELGATE_ADMIN_TOKEN" {
					return tc.envToken
				}
				return ""
			}
			args := []string{"dev", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--data-dir", t.TempDir()}
			go func() {
				done <- run(ctx, args, env{getenv: getenv, stdout: &out, stderr: io.Discard, ready: func(a devAddrs) { ready <- a }})
			}()
			var a devAddrs
			select {
			case a = <-ready:
			case err := <-done:
				if tc.wantErr == "" || err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("dev ended with %v, want an error about %q", err, tc.wantErr)
				}
				return
			case <-time.After(30 * time.Second):
				t.Fatal("dev did not start")
			}
			defer func() { cancel(); <-done }()
			if tc.wantErr != "" {
				t.Fatalf("dev started, want an error about %q", tc.wantErr)
			}
			text := out.String()
			wantToken := "admin token: " + a.AdminToken + "   (shown once"
			if tc.envToken != "" {
				wantToken = "admin token: $MODELGATE_ADMIN_TOKEN\n"
				if a.AdminToken != tc.envToken || strings.Contains(text, tc.envToken) {
					t.Errorf("the token from the environment: addrs have %q; printed: %v", a.AdminToken, strings.Contains(text, tc.envToken))
				}
			}
			if !strings.Contains(text, "dashboard: "+a.Admin+"/admin/\n") || !strings.Contains(text, wantToken) {
				t.Errorf("dev printed:\n%s\nwant the dashboard URL and %q", text, wantToken)
			}
			var accounts struct{ Data []any }
			adminGet(t, a, "/admin/v1/accounts", &accounts)
			if len(accounts.Data) != 1 { // dev's own account
				t.Errorf("accounts = %v", accounts.Data)
			}
		})
	}
}

// checkSpendInBrowser checks the spending half of the browser walk.
func checkSpendInBrowser(t *testing.T, r browserResult) {
	t.Helper()
	// The price: model, always, input 1000, cached as input, output 1000.
	// Model, from, input, cached input, cache writes, for an hour, output, reasoning, audio, web search, images, set in.
	if len(r.PriceRow) < 12 || r.PriceRow[0] != "gpt-4o-mini" || r.PriceRow[1] != "always" || r.PriceRow[2] != "1000.00" ||
		r.PriceRow[4] != "as input" || r.PriceRow[5] != "2000.00" || r.PriceRow[6] != "1000.00" || r.PriceRow[9] != "0.01" ||
		r.PriceRow[11] != "dashboard or API" {
		t.Errorf("price row = %q", r.PriceRow)
	}
	if r.SecretAfterReload || r.SpenderKeys != 1 {
		t.Errorf("reloading a new key's page: secret shown again %v, %d keys (want 1)", r.SecretAfterReload, r.SpenderKeys)
	}
	if !strings.Contains(r.BudgetRefusal, `"half a dollar" is not an amount such as 12.50`) || r.TypedKept != "half a dollar" {
		t.Errorf("a refused budget: %q, field kept %q", r.BudgetRefusal, r.TypedKept)
	}
	if !strings.Contains(r.EffectiveBudget, "account: USD 0.00 of 0.50 per month") {
		t.Errorf("in effect: %q", r.EffectiveBudget)
	}
	// 385 tokens at 1000 a million: 0.385 a request. Two fit in 0.50 (the
	// second starts at 0.385 spent), the third is refused.
	if len(r.SpendStatuses) != 3 || r.SpendStatuses[0] != 200 || r.SpendStatuses[1] != 200 || r.SpendStatuses[2] != 429 ||
		r.RefusalCode != "insufficient_quota" || !strings.Contains(r.RefusalMessage, "your account's monthly budget of USD 0.50 is spent") {
		t.Errorf("spending: %v, refusal %q %q", r.SpendStatuses, r.RefusalCode, r.RefusalMessage)
	}
	// By model: 3 requests, 2 succeeded, 1 refused, 0 failed; 770 tokens
	// and no web searches costing 0.77.
	if len(r.SpendRow) != 12 || r.SpendRow[1] != "3" || r.SpendRow[2] != "2" || r.SpendRow[3] != "1" || r.SpendRow[4] != "0" ||
		r.SpendRow[7] != "770" || r.SpendRow[10] != "0" || r.SpendRow[11] != "USD 0.77" {
		t.Errorf("usage of the spender = %q", r.SpendRow)
	}
	if len(r.BudgetRow) != 6 || r.BudgetRow[0] != "account spender" || r.BudgetRow[1] != "per month" ||
		r.BudgetRow[2] != "USD 0.77" || r.BudgetRow[3] != "USD 0.50" || r.BudgetRow[4] != "154 %" {
		t.Errorf("budget row = %q", r.BudgetRow)
	}
	// Newest first: the budget, then the key, the account and the price,
	// each by this browser's session.
	var got []string
	for _, e := range r.Audit {
		if len(e) == 3 && strings.HasPrefix(e[0], "dashboard session ") {
			got = append(got, e[1])
		}
	}
	want := []string{"account.update", "key.create", "account.create", "price.set"} // the refused save changed nothing
	if len(got) < len(want) || strings.Join(got[:len(want)], " ") != strings.Join(want, " ") {
		t.Errorf("audit actions by the session = %q, want them to start with %q (all: %q)", got, want, r.Audit)
	}
	if !strings.HasPrefix(r.DisableDialog, "Disable this account?") || !r.KeyStateDisabled {
		t.Errorf("disabling: dialog %q, key shown disabled %v", r.DisableDialog, r.KeyStateDisabled)
	}
	for path, n := range r.Narrow {
		if n.Width > 390 || n.Nav > 390 {
			t.Errorf("%s at 390px: the page is %vpx wide, its navigation reaches %vpx", path, n.Width, n.Nav)
		}
	}
	if len(r.Narrow) != 5 {
		t.Errorf("checked %d pages at 390px, want 5", len(r.Narrow))
	}
}
