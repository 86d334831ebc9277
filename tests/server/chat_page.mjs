// The chat page (GET /) in Debian's headless Chromium, driven by
// playwright-core: a prompt is typed and sent, the streamed answer shows,
// a screenshot is taken, and the text on the page must equal what
// /v1/chat/completions answers for the same conversation and settings
// (greedy, so the two are the same tokens).
//   node chat_page.mjs URL API_KEY SCREENSHOT.png
import assert from "node:assert/strict";
import { chromium } from "playwright-core";

const [base, apiKey, screenshot] = process.argv.slice(2);
const prompt = "Once upon a time";
const maxTokens = 40;

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"],
});
try {
  const page = await browser.newPage({ viewport: { width: 1000, height: 640 } });
  const consoleErrors = [];
  page.on("console", (m) => { if (m.type() === "error") consoleErrors.push(m.text()); });
  page.on("pageerror", (e) => consoleErrors.push(e.message));
  // The key as the page keeps it once typed: in localStorage.
  await page.addInitScript((key) => localStorage.setItem("pvllm-api-key", key), apiKey);
  await page.goto(base + "/");
  await page.fill("#temperature", "0");
  await page.fill("#max-tokens", String(maxTokens));
  await page.waitForFunction(() => !document.getElementById("model").textContent.startsWith("("));
  await page.fill("#input", prompt);
  await page.click("#send");
  await page.waitForFunction(() => ["done", "error"].includes(
    document.getElementById("status").dataset.state), null, { timeout: 60_000 });
  const status = await page.textContent("#status");
  const shown = await page.$$eval(".message.assistant", (els) => els.map((e) => e.textContent));
  const user = await page.$$eval(".message.user", (els) => els.map((e) => e.textContent));
  await page.screenshot({ path: screenshot, fullPage: true });

  const response = await fetch(base + "/v1/chat/completions", {
    method: "POST",
    headers: { "Content-Type": "application/json", Authorization: `Bearer ${apiKey}` },
    body: JSON.stringify({ messages: [{ role: "user", content: prompt }], temperature: 0,
                           max_tokens: maxTokens }),
  });
  const expected = (await response.json()).choices[0].message.content;
  assert.match(status, /^done \((stop|length), \d+ tokens, [\d.]+ tokens\/s\)$/, status);
  assert.deepEqual(user, [prompt]);
  assert.equal(shown.length, 1);
  assert.equal(shown[0], expected, "the page shows what the API answers");
  assert.deepEqual(consoleErrors, []);
  console.log(`chat page: "${prompt}" -> "${shown[0]}" (${status}); screenshot ${screenshot}`);
} finally {
  await browser.close();
}
