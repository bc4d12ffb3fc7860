// One small page interface over the two browser drivers the dashboard test uses, so that
// dashboard.mjs runs the same steps in both browsers: Debian's Chromium driven by
// playwright-core (over the DevTools protocol) and Debian's Firefox ESR driven by
// puppeteer-core over WebDriver BiDi (Playwright drives only its own patched Firefox, and
// Debian ships no geckodriver). Waits and visibility are evaluated in the page by the same
// function in both, so a step means the same thing whichever browser runs it.

/**
 * Opens a headless browser and one page of `width`×`height` CSS pixels.
 * `kind` is "chromium" or "firefox"; `executablePath` the browser's binary.
 * Resolves to { name, goto, fill, click, select, waitFor, visible, count, sleep, url, shot,
 * errors, close }; `errors` collects the page's uncaught exceptions.
 */
export async function openPage(kind, executablePath, { width, height }) {
  if (kind === "chromium") return openPlaywrightChromium(executablePath, width, height);
  if (kind === "firefox") return openPuppeteerFirefox(executablePath, width, height);
  throw new Error(`BROWSER must be chromium or firefox, not ${JSON.stringify(kind)}`);
}

// Evaluated in the page: is there an element matching `sel` whose trimmed text matches
// `text` (a RegExp source and flags, or null for any) and, if `visible`, that is rendered?
function matchingElement([sel, source, flags, visible]) {
  const re = source === null ? null : new RegExp(source, flags);
  for (const el of document.querySelectorAll(sel)) {
    if (re && !re.test(el.textContent.trim())) continue;
    if (visible && !el.checkVisibility()) continue;
    return true;
  }
  return false;
}

function isVisible(sel) {
  const el = document.querySelector(sel);
  return el !== null && el.checkVisibility();
}

function countOf(sel) {
  return document.querySelectorAll(sel).length;
}

function waitArgs(sel, { text = null, visible = true } = {}) {
  const re = text === null ? null : text instanceof RegExp ? text : new RegExp(escape(text));
  return [sel, re && re.source, re && re.flags, visible];
}

function escape(s) {
  return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// The interface both drivers share once a page is open; `driver` holds the calls whose
// names or argument orders differ between Playwright and Puppeteer.
function pageInterface(name, page, driver) {
  const errors = [];
  page.on("pageerror", (e) => errors.push(e.message ?? String(e)));
  return {
    name,
    goto: (url) => page.goto(url),
    fill: driver.fill,
    click: (sel) => page.click(sel),
    select: driver.select,
    waitFor: (sel, opts = {}) => driver.waitForFunction(waitArgs(sel, opts), opts.timeout ?? 20_000),
    visible: (sel) => page.evaluate(isVisible, sel),
    count: (sel) => page.evaluate(countOf, sel),
    sleep,
    url: () => page.url(),
    shot: (path) => page.screenshot({ path, fullPage: true }),
    errors,
    close: driver.close,
  };
}

async function openPlaywrightChromium(executablePath, width, height) {
  const { chromium } = await import("playwright-core");
  const browser = await chromium.launch({
    executablePath,
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
  });
  const page = await browser.newPage({ viewport: { width, height } });
  return pageInterface(await page.evaluate(() => navigator.userAgent), page, {
    fill: (sel, value) => page.fill(sel, value),
    select: (sel, value) => page.selectOption(sel, value),
    waitForFunction: (args, timeout) => page.waitForFunction(matchingElement, args, { timeout }),
    close: () => browser.close(),
  });
}

async function openPuppeteerFirefox(executablePath, width, height) {
  const { default: puppeteer } = await import("puppeteer-core");
  const browser = await puppeteer.launch({ browser: "firefox", executablePath, headless: true });
  const page = await browser.newPage();
  await page.setViewport({ width, height });
  return pageInterface(await page.evaluate(() => navigator.userAgent), page, {
    fill: (sel, value) => page.locator(sel).fill(value),
    select: (sel, value) => page.select(sel, value),
    waitForFunction: (args, timeout) => page.waitForFunction(matchingElement, { timeout }, args),
    close: () => browser.close(),
  });
}
