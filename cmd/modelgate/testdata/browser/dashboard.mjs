// Drives the dashboard of a running `modelgate dev` in Debian's headless
// Chromium, for cmd/modelgate's TestDashboardInBrowser: sign in, create an
// account and a key, see the key once, use it for a chat completion, find
// the request in the usage view, revoke the key and see it refused; then
// set a price, put a monthly budget on another account, spend it, see the
// 429 insufficient_quota, the spending and the audit log, disable the
// account, and look at the pages 390 pixels wide.
//
// Input comes from the environment (see need below); a JSON summary goes to
// stdout for the Go test to assert on, screenshots to MODELGATE_ARTIFACTS.
import { join } from "node:path";
import { chromium } from "playwright-core";

function need(name) {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set`);
  return v;
}
const admin = need("MODELGATE_ADMIN_URL"); // http://host:port of the admin listener
const adminToken = need("MODELGATE_ADMIN_TOKEN");
const gateway = need("MODELGATE_BASE_URL"); // the OpenAI base URL, ending in /v1
const artifacts = need("MODELGATE_ARTIFACTS");
const executablePath = process.env.CHROMIUM || "/usr/bin/chromium";

// chat sends one chat completion with the key and returns its status and
// body.
async function chat(key) {
  const resp = await fetch(`${gateway}/chat/completions`, {
    method: "POST",
    headers: { Authorization: `Bearer ${key}`, "Content-Type": "application/json" },
    body: JSON.stringify({ model: "gpt-4o-mini", messages: [{ role: "user", content: "Hello!" }] }),
  });
  return { status: resp.status, body: await resp.json() };
}

// check fails the run with a message when a condition does not hold.
function check(ok, message) {
  if (!ok) throw new Error(message);
}

const browser = await chromium.launch({
  executablePath,
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--no-first-run"],
});
const result = { screenshots: {} };
try {
  const context = await browser.newContext({ viewport: { width: 1100, height: 800 } });
  await context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: admin });
  const page = await context.newPage();
  page.on("dialog", (d) => d.accept()); // the "Revoke this key for good?" confirmation

  // Sign in.
  await page.goto(`${admin}/admin/`);
  check(page.url().endsWith("/admin/login"), `not sent to sign in: ${page.url()}`);
  await page.getByLabel("Admin token").fill(adminToken);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.waitForURL("**/admin/accounts");

  // Create an account, then a key for it allowed gpt-4o-mini only.
  const newAccount = page.locator("#new-account");
  await newAccount.getByLabel("Name").fill("browser-test");
  await newAccount.getByRole("button", { name: "Create account" }).click();
  await page.waitForURL(/\/admin\/accounts\/[^/?]+\?done=created$/);
  result.accountId = new URL(page.url()).pathname.split("/").pop();
  const newKey = page.locator("#new-key");
  await newKey.getByLabel("Name").fill("browser key");
  await newKey.getByLabel("gpt-4o-mini", { exact: true }).check();
  await newKey.getByRole("button", { name: "Create key" }).click();

  // The key, shown this once, with a copy button.
  const secret = (await page.locator("#secret").textContent()).trim();
  result.secret = secret;
  result.shownOnceWarning = (await page.locator("#created-key").textContent()).includes("shown only once");
  const copy = page.getByRole("button", { name: "Copy" });
  await copy.click();
  const copied = page.locator("button[data-copy]", { hasText: /Copied|Selected/ }); // the copy is async
  await copied.waitFor({ timeout: 5000 });
  result.copyButton = (await copied.textContent()).trim();
  result.clipboardMatches = (await page.evaluate(() => navigator.clipboard.readText())) === secret;
  result.screenshots.key = join(artifacts, "key-created.png");
  await page.screenshot({ path: result.screenshots.key, fullPage: true });

  // Afterwards only its prefix.
  await page.locator("#done").click();
  await page.waitForURL(`**/admin/accounts/${result.accountId}`);
  const accountPage = await page.content();
  result.secretShownAgain = accountPage.includes(secret);
  const keyLink = page.locator("#keys a", { hasText: secret.slice(0, 12) });
  result.prefixListed = (await keyLink.count()) === 1;

  // Use it.
  const first = await chat(secret);
  result.chatStatus = first.status;
  result.chatContent = first.body.choices?.[0]?.message?.content ?? "";

  // Find the request in the usage view; the ledger writes in batches, so
  // reload until it shows.
  const usageURL = `${admin}/admin/usage?account_id=${result.accountId}&grouped=1&by=day&by=key&by=model`;
  const row = page.locator("#usage tbody tr", { hasText: "gpt-4o-mini" });
  for (let i = 0; i < 50 && (await row.count()) === 0; i++) {
    if (i > 0) await page.waitForTimeout(200);
    await page.goto(usageURL);
  }
  result.usageRow = (await row.first().innerText()).split("\t").map((s) => s.trim());
  result.chartBars = await page.locator("#usage-chart rect.bar").count();
  result.screenshots.chart = join(artifacts, "usage-chart.png");
  await page.locator("figure.chart").screenshot({ path: result.screenshots.chart });
  result.screenshots.usage = join(artifacts, "usage-page.png");
  await page.screenshot({ path: result.screenshots.usage, fullPage: true });

  // Revoke it from its page; the gateway refuses it at once.
  await page.goto(`${admin}/admin/accounts/${result.accountId}`);
  await keyLink.click();
  await page.getByRole("button", { name: "Revoke" }).click();
  await page.waitForURL(/\?done=revoked$/);
  result.stateAfterRevoke = (await page.locator("#key-state").textContent()).trim();
  const after = await chat(secret);
  result.statusAfterRevoke = after.status;
  result.errorAfterRevoke = after.body.error?.code ?? "";

  // Spend: set a price, put a monthly budget on an account, spend it
  // through the gateway, and see the refusal, the spending and the audit.
  await page.goto(`${admin}/admin/prices`);
  const setPrice = page.locator("#set-price");
  await setPrice.getByLabel("Model").selectOption("gpt-4o-mini");
  await setPrice.getByLabel("Input, per million tokens").fill("1000");
  await setPrice.getByLabel("Output, per million tokens").fill("1000");
  await setPrice.getByLabel("Cache writes, 1h").fill("2000");
  await setPrice.getByLabel("Web search, each").fill("0.01");
  await setPrice.getByRole("button", { name: "Set price" }).click();
  await page.waitForURL(/\/admin\/prices\?done=saved$/);
  result.priceRow = (await page.locator("#prices tbody tr", { hasText: "gpt-4o-mini" }).first().innerText())
    .split("\t").map((s) => s.trim());

  await page.goto(`${admin}/admin/accounts`);
  await newAccount.getByLabel("Name").fill("spender");
  await newAccount.getByRole("button", { name: "Create account" }).click();
  await page.waitForURL(/\/admin\/accounts\/[^/?]+\?done=created$/);
  result.spenderId = new URL(page.url()).pathname.split("/").pop();
  await newKey.getByLabel("Name").fill("spender key");
  await newKey.getByRole("button", { name: "Create key" }).click();
  const spenderKey = (await page.locator("#secret").textContent()).trim();
  // Reloading the page of a new key does not make another one, nor show
  // the secret again.
  await page.reload();
  result.secretAfterReload = (await page.content()).includes(spenderKey);
  await page.goto(`${admin}/admin/accounts/${result.spenderId}`);
  result.spenderKeys = await page.locator("#keys tbody tr").count();

  const settings = page.locator("#account-settings");
  // A refused form keeps what was typed and says why in plain words.
  await settings.getByLabel("Amount (USD)").fill("half a dollar");
  await settings.getByRole("button", { name: "Save account" }).click();
  result.budgetRefusal = (await settings.locator("[role=alert]").textContent()).trim();
  result.typedKept = await settings.getByLabel("Amount (USD)").inputValue();
  await settings.getByLabel("Amount (USD)").fill("0.5");
  await settings.locator("select[name=budget_period]").selectOption("month");
  await settings.getByRole("button", { name: "Save account" }).click();
  await page.waitForURL(/\?done=saved$/);
  result.effectiveBudget = (await page.locator("#effective").innerText()).replace(/\s+/g, " ");

  result.spendStatuses = [];
  let refusal = null;
  for (let i = 0; i < 3; i++) {
    const r = await chat(spenderKey);
    result.spendStatuses.push(r.status);
    if (r.status === 429) refusal = r.body.error;
  }
  result.refusalCode = refusal?.code ?? "";
  result.refusalMessage = refusal?.message ?? "";

  const spendURL = `${admin}/admin/usage?account_id=${result.spenderId}&grouped=1&by=model`;
  const spendRow = page.locator("#usage tbody tr", { hasText: "gpt-4o-mini" });
  for (let i = 0; i < 50; i++) {
    if (i > 0) await page.waitForTimeout(200);
    await page.goto(spendURL);
    if ((await spendRow.count()) > 0 && (await spendRow.first().innerText()).split("\t")[1].trim() === "3") break;
  }
  result.spendRow = (await spendRow.first().innerText()).split("\t").map((s) => s.trim());
  result.budgetRow = (await page.locator("#budgets tbody tr").first().innerText()).split("\t").map((s) => s.trim());
  result.screenshots.spend = join(artifacts, "usage-spend.png");
  await page.screenshot({ path: result.screenshots.spend, fullPage: true });

  await page.goto(`${admin}/admin/audit`);
  result.audit = await page.locator("#audit tbody tr").evaluateAll((rows) =>
    rows.map((r) => [...r.cells].slice(1, 4).map((c) => c.innerText.trim())));

  // Disabling the account asks first; then its keys show as disabled.
  let dialog = "";
  page.removeAllListeners("dialog");
  page.on("dialog", (d) => { dialog = d.message(); d.accept(); });
  await page.goto(`${admin}/admin/accounts/${result.spenderId}`);
  await page.getByRole("button", { name: "Disable account" }).click();
  await page.waitForURL(/\?done=disabled$/);
  result.disableDialog = dialog;
  result.keyStateDisabled = (await page.locator("#keys tbody tr").first().innerText()).includes("disabled (account)");

  // At 390 pixels wide, with a long name, nothing is wider than the
  // screen and the navigation stays in view.
  await page.setViewportSize({ width: 390, height: 844 });
  await page.goto(`${admin}/admin/accounts/${result.spenderId}`);
  await page.locator("#account-settings").getByLabel("Name").fill("a-very-long-account-name-".repeat(6));
  await page.locator("#account-settings").getByRole("button", { name: "Save account" }).click();
  await page.waitForURL(/\?done=saved$/);
  result.narrow = {};
  for (const path of ["/admin/accounts", `/admin/accounts/${result.spenderId}`, "/admin/usage", "/admin/prices", "/admin/audit"]) {
    await page.goto(`${admin}${path}`);
    result.narrow[path] = await page.evaluate(() => ({
      width: document.documentElement.scrollWidth,
      nav: Math.max(...[...document.querySelectorAll("header nav a")].map((a) => a.getBoundingClientRect().right)),
    }));
  }
  result.screenshots.narrow = join(artifacts, "account-390px.png");
  await page.goto(`${admin}/admin/accounts/${result.spenderId}`);
  await page.screenshot({ path: result.screenshots.narrow }); // what a phone shows first
} finally {
  await browser.close();
}
console.log(JSON.stringify(result));
