// Takes the Temporal UI screenshots for docs/images; scripts/screenshots.sh runs it with
// playwright-core on NODE_PATH: node screenshots.cjs <ui-url> <message-id> <out-dir>
const { chromium } = require("playwright-core");

const [ui, message, out] = process.argv.slice(2);
const ns = "default";

// The UI's own API finds the runs, so the pages opened are the ones simulate just made.
async function runs(query) {
  const url = `${ui}/api/v1/namespaces/${ns}/workflows?query=${encodeURIComponent(query)}`;
  for (let i = 0; i < 60; i++) {
    const res = await fetch(url);
    const body = await res.json();
    if (body.executions && body.executions.length) return body.executions;
    await new Promise((r) => setTimeout(r, 1000)); // visibility is eventually consistent
  }
  throw new Error(`no runs for ${query}`);
}

(async () => {
  const bounce = (await runs(`MessageID="${message}" AND EventType="email.bounced"`))[0].execution;
  const browser = await chromium.launch({ executablePath: "/usr/bin/chromium", args: ["--no-sandbox"] });
  const page = await browser.newPage({ viewport: { width: 1440, height: 900 } });

  await page.goto(`${ui}/namespaces/${ns}/workflows?query=${encodeURIComponent(`MessageID="${message}"`)}`);
  await page.waitForSelector(`text=${bounce.workflowId}`, { timeout: 60000 });
  await page.waitForLoadState("networkidle");
  await page.screenshot({ path: `${out}/ui-message-runs.png` });

  const run = `${ui}/namespaces/${ns}/workflows/${encodeURIComponent(bounce.workflowId)}/${bounce.runId}/history`;
  // Tall enough for the input, the result and the steps below them: the page scrolls inside
  // its own container, which a full-page screenshot does not follow.
  await page.setViewportSize({ width: 1440, height: 1700 });
  await page.goto(run);
  await page.waitForSelector("text=MarkProcessed", { timeout: 60000 });
  await page.waitForLoadState("networkidle");
  // One step opened: the Process marker's summary and result.
  const step = page.locator("tr", { hasText: "Local Activity" }).filter({ hasText: "Process" }).filter({ hasNotText: "MarkProcessed" });
  await step.first().click();
  await page.waitForSelector("text=Marker Name", { timeout: 30000 });
  await page.waitForTimeout(500);
  await page.screenshot({ path: `${out}/ui-bounce-run.png` });
  await browser.close();
})().catch((err) => {
  console.error(`screenshots: ${err.message}`);
  process.exit(1);
});
