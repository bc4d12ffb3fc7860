// The dashboard in a real browser, run by tests/e2e/dashboard.rs against a `polygateway serve`
// whose LLM scope has sources openai-1 and openai-2 on the mock (breaker threshold 2,
// openai-2 limited to 3 concurrent calls) and whose BAD scope always fails. BROWSER is
// "chromium" (Debian's, driven by playwright-core) or "firefox" (Debian's Firefox ESR, driven
// by puppeteer-core over WebDriver BiDi), BROWSER_PATH its binary; browser.mjs gives both the
// same page interface. Prints `browser: <user agent>`, then `step: <name>` after each check,
// and writes a screenshot of each page to $OUT_DIR. Any failed wait throws and exits non-zero.
import { join } from "node:path";
import { openPage } from "./browser.mjs";

const { GW_URL, ADMIN_KEY, CLIENT_KEY, MOCK_URL, TAG, OUT_DIR, BROWSER, BROWSER_PATH } = process.env;

async function scriptMock(name, script) {
  const r = await fetch(`${MOCK_URL}/_mock/scenarios/${name}`, {
    method: "PUT", headers: { "content-type": "application/json" }, body: JSON.stringify(script),
  });
  if (r.status !== 204) throw new Error(`mock refused the script of ${name}: ${r.status}`);
}

async function chat(model) {
  const r = await fetch(`${GW_URL}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${CLIENT_KEY}` },
    body: JSON.stringify({ model, messages: [{ role: "user", content: "hello from the browser test" }] }),
  });
  await r.arrayBuffer();
  return r.status;
}

function expectStatus(got, want, what) {
  if (got !== want) throw new Error(`${what}: status ${got}, expected ${want}`);
}

const page = await openPage(BROWSER, BROWSER_PATH, { width: 1440, height: 1000 });
try {
  console.log(`browser: ${page.name}`);
  const shot = (name) => page.shot(join(OUT_DIR, `${name}.png`));

  // Sign in: a wrong key is refused with the gateway's message, the admin key is accepted.
  await page.goto(`${GW_URL}/ui/`);
  const signedOutOnly = async (what) => {
    if (await page.visible("#nav")) throw new Error(`the navigation shows ${what}`);
    if (await page.visible("#page-overview")) throw new Error(`the overview shows ${what}`);
  };
  await signedOutOnly("before sign-in");
  await page.fill("#admin-key", "not-the-key");
  await page.click("#login-form button");
  await page.waitFor("#login-error", { text: /./ });
  await signedOutOnly("after a refused key");
  await shot("login");
  await page.fill("#admin-key", ADMIN_KEY);
  await page.click("#login-form button");
  await page.waitFor("#nav");
  if (page.url().includes(ADMIN_KEY)) throw new Error("the admin key is in the URL");
  console.log("step: signed in");

  // Overview: three answered calls show in the live totals.
  for (let i = 0; i < 3; i++) expectStatus(await chat("llm"), 200, "warm-up call");
  await page.waitFor('[data-testid="card-total"] .value', { text: /^3$/ });
  await page.waitFor("#chart-rps .uplot");
  await shot("overview");
  console.log("step: overview counts calls");

  // A breaker opens: openai-1 fails every request; calls fail over to openai-2.
  await scriptMock(`${TAG}-a`, { then: { status: 500 } });
  for (let i = 0; i < 4; i++) expectStatus(await chat("llm"), 200, "failover call");
  await page.goto(`${GW_URL}/ui/#/sources`);
  if (!(await page.visible("#nav"))) {
    // A navigation by URL keeps the page (only the hash changed); this guards the test.
    throw new Error("navigating to #/sources signed the page out");
  }
  await page.waitFor('[data-testid="breaker-openai-1"][data-state="open"]');
  await page.waitFor('[data-testid="breaker-openai-2"][data-state="closed"]');
  await shot("sources-breaker-open");
  console.log("step: breaker open");

  // The limiter gate fills: three slow calls hold openai-2's three slots.
  await scriptMock(`${TAG}-b`, { then: { usage: true, first_token_delay_ms: 5000 } });
  const slow = [chat("llm"), chat("llm"), chat("llm")];
  await page.waitFor('[data-testid="gate-concurrency-openai-2"]', { text: "3 / 3" });
  await shot("sources-gate-full");
  console.log("step: gate full");
  for (const s of await Promise.all(slow)) expectStatus(s, 200, "slow call");

  // Spend, grouped by source.
  await page.goto(`${GW_URL}/ui/#/spend`);
  await page.select("#spend-group", "source");
  await page.click("#spend-form button");
  await page.waitFor('[data-testid="spend-openai-2"]');
  await shot("spend");
  console.log("step: spend by source");

  // One failed call, found with the filters, and its attempts.
  expectStatus(await chat("bad"), 503, "the BAD scope's call");
  await page.goto(`${GW_URL}/ui/#/calls`);
  await page.select("#f-scope", "BAD");
  await page.select("#f-status", "failure");
  const failedRows = '#calls-table tbody tr[data-status="failure"]';
  const allRows = "#calls-table tbody tr";
  // The ledger writer is asynchronous: filter again until the one failed call is listed.
  for (let i = 0; i < 40; i++) {
    await page.click("#calls-form button");
    await page.sleep(250);
    if ((await page.count(allRows)) === 1 && (await page.count(failedRows)) === 1) break;
  }
  const rows = await page.count(allRows);
  const failed = await page.count(failedRows);
  if (rows !== 1 || failed !== 1) throw new Error(`the filtered list has ${rows} rows (${failed} failed), expected the one failed call`);
  await shot("calls-failed");
  console.log("step: one failed call");
  await page.click(failedRows);
  await page.waitFor('[data-testid="attempt-1"]', { text: "transient" });
  const attempts = await page.count("#attempts-table tbody tr");
  if (attempts < 1) throw new Error("no attempts listed");
  await shot("call-attempts");
  console.log("step: attempts shown");

  if (page.errors.length) throw new Error("page errors: " + page.errors.join("; "));
} finally {
  await page.close();
}
