// The new user's walk (issue 43): from the console's sign-in page to why an address bounced,
// following only what the pages say: every step finds its link, field or button by the text a
// person reads (no test ids), and the walk's time is taken per step. TestANewUserFindsWhyAnAddressBounced
// (internal/e2e) runs it in make test; scripts/console-walk.sh against `make run` after
// `mailhook simulate`:
//
//   node walk.cjs <base-url> <token> <address> [screenshot-dir]
//
// It prints one line per step (its time in ms and the actions a person makes in it), then the
// message it opened and the bounce the page gave, and exits 1 when a step cannot be made from
// what the page shows. CHROMIUM names the browser (default /usr/bin/chromium).
const { chromium } = require("playwright-core");

const [base, token, address, out] = process.argv.slice(2);

(async () => {
  const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || "/usr/bin/chromium", args: ["--no-sandbox"] });
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  page.setDefaultTimeout(30000);
  const steps = [];
  let t0 = Date.now();
  const start = t0;
  const step = async (name, actions, fn) => {
    const t = Date.now();
    await fn();
    steps.push({ name, actions, ms: Date.now() - t });
    console.log(`step ${steps.length}: ${name}: ${Date.now() - t} ms (${actions})`);
  };

  await step("open the console (the URL make run printed)", "type the URL", async () => {
    await page.goto(`${base}/console`);
    await page.getByRole("button", { name: /sign in/i }).waitFor();
  });
  await step("sign in with the token make run printed", "type the token, click Sign in", async () => {
    await page.getByLabel(/token/i).fill(token);
    await page.getByRole("button", { name: /sign in/i }).click();
    await page.getByRole("link", { name: "Messages", exact: true }).waitFor();
  });
  await step("open Messages", "click Messages in the menu", async () => {
    await page.getByRole("link", { name: "Messages", exact: true }).click();
    await page.getByLabel(/recipient/i).waitFor();
  });
  await step("find the address's messages", "type the address, click Find their messages", async () => {
    await page.getByLabel(/recipient/i).fill(address);
    await page.getByRole("button", { name: /find their messages/i }).click();
    await page.getByText(/newest first/i).first().waitFor();
  });
  if (out) await page.screenshot({ path: `${out}/walk-1-recipient.png`, fullPage: true });
  let bounce = "";
  await step("open the newest bounced message", "click its message id", async () => {
    // The list gives each message's status: the newest whose status says bounced.
    const row = page.getByRole("row").filter({ has: page.getByRole("cell", { name: /^bounced/ }) }).first();
    await row.getByRole("link").first().click();
    await page.getByText(/^Bounce$/).waitFor();
    bounce = (await page.locator("dt", { hasText: /^Bounce$/ }).locator("xpath=following-sibling::dd[1]").innerText()).trim();
  });
  if (out) await page.screenshot({ path: `${out}/walk-2-message.png`, fullPage: true });
  const opened = (await page.locator("dt", { hasText: /^Message id$/ }).locator("xpath=following-sibling::dd[1]").innerText()).trim();
  const status = (await page.locator("dt", { hasText: /^Status$/ }).locator("xpath=following-sibling::dd[1]").innerText()).trim();
  const total = Date.now() - start;
  console.log(`opened: ${opened}`);
  console.log(`found: status ${status}; bounce ${bounce}`);
  console.log(`walk: ${steps.length} steps, ${steps.reduce((n, s) => n + s.actions.split(",").length, 0)} actions, ${total} ms in the browser`);
  await browser.close();
  if (!/bounced/.test(status) || bounce === "") {
    console.error("the page did not say why the address bounced");
    process.exit(1);
  }
})().catch((err) => {
  console.error(`console-walk: ${err.message}`);
  process.exit(1);
});
