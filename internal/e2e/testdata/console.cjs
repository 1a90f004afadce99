// Drives the operator console in Debian's headless Chromium through playwright-core (on
// NODE_PATH), for TestConsoleInABrowser (console_test.go), which made the data and asserts what
// this prints: one JSON object on stdout. Input is JSON in the CONSOLE_INPUT environment variable:
//   {base, admin, viewer, provider, message, erased, erasedMessage, recipient, sink, backupSink, screenshots}
// screenshots, when set, is the directory the page screenshots are saved in
// (docs/images/console-*.png, retaken by scripts/console-screenshots.sh).
const { chromium } = require("playwright-core");

const input = JSON.parse(process.env.CONSOLE_INPUT);
const out = { pages: {}, steps: [] };
const shots = input.screenshots || "";

async function shot(page, name) {
  if (shots) await page.screenshot({ path: `${shots}/console-${name}.png`, fullPage: true });
}

// submit clicks a form's button and waits for the page it answers.
async function submit(page, selector) {
  const [resp] = await Promise.all([page.waitForNavigation(), page.click(selector)]);
  return resp ? resp.status() : 0;
}

// visit opens a page and records what the test asserts of every page.
async function visit(page, name, path) {
  const resp = await page.goto(input.base + path);
  const html = await page.content();
  const text = await page.innerText("main");
  const rec = {
    status: resp.status(),
    url: page.url(),
    title: await page.title(),
    actor: (await page.locator("[data-actor]").allInnerTexts()).join(""),
    erased: html.includes(input.erased) || html.toLowerCase().includes(input.erased.toLowerCase()),
    text,
    actions: await page.locator("[data-action]").evaluateAll((els) => els.map((e) => e.getAttribute("data-action"))),
    csp: resp.headers()["content-security-policy"] || "",
  };
  out.pages[name] = rec;
  return rec;
}

(async () => {
  const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || "/usr/bin/chromium", args: ["--no-sandbox"] });
  try {
    const ctx = await browser.newContext({ viewport: { width: 1360, height: 900 } });
    const page = await ctx.newPage();
    // Nothing may run: the CSP forbids every script, and the pages have none.
    const consoleErrors = [];
    page.on("console", (m) => m.type() === "error" && consoleErrors.push(m.text()));

    // Sign in.
    await page.goto(input.base + "/console/sinks");
    out.signedOutLandsOn = new URL(page.url()).pathname;
    await shot(page, "sign-in");
    await page.fill("input[name=token]", input.admin);
    out.signInStatus = await submit(page, "form.login button[type=submit]");
    out.afterSignIn = new URL(page.url()).pathname;
    const cookies = await ctx.cookies();
    const session = cookies.find((c) => c.name === "mailhook_console");
    out.cookie = session ? { httpOnly: session.httpOnly, sameSite: session.sameSite, path: session.path, hasToken: session.value.includes(input.admin) } : null;

    // Every page, with the data the test made.
    const pages = {
      overview: "/console",
      messages: "/console/messages",
      rejected: "/console/rejected",
      quarantine: "/console/quarantine",
      sinks: "/console/sinks",
      suppressions: "/console/suppressions",
      // Today's counts, counted now: the page shows the daily reconciliation's stored counts of a
      // day once that day was counted, and this run's events are today's.
      reconciliation: "/console/reconciliation?live=1&date=" + new Date().toISOString().slice(0, 10),
      erasures: "/console/erasures",
      events: "/console/events",
      audit: "/console/audit",
    };
    out.menu = await page.locator("nav a").allInnerTexts();
    for (const [name, path] of Object.entries(pages)) {
      await visit(page, name, path);
      if (!["messages", "sinks", "events", "audit"].includes(name)) await shot(page, name);
    }

    // The Events page filtered by the recipient: the message's events, the address masked.
    await visit(page, "eventsByRecipient", `/console/events?recipient=${encodeURIComponent(input.recipient)}`);
    out.eventsByRecipient = await page.locator("[data-table=explorer] tbody tr").evaluateAll((rows) => rows.map((r) => r.getAttribute("data-event")));
    // The erased address: found nowhere.
    await page.goto(input.base + `/console/messages?recipient=${encodeURIComponent(input.erased)}`);
    out.erasedSearch = await page.locator("[data-found-message]").count();
    await page.goto(input.base + `/console/events?recipient=${encodeURIComponent(input.erased)}`);
    out.erasedEvents = await page.locator("[data-table=explorer] tbody tr").count();

    // A message found by its recipient, then its timeline.
    await page.goto(input.base + "/console/messages");
    await page.fill("input[name=recipient]", input.recipient);
    await submit(page, "[data-action=find-recipient]");
    out.byRecipient = await page.locator("[data-found-message]").evaluateAll((rows) => rows.map((r) => r.getAttribute("data-found-message")));
    // The list shows the address masked (the form's field keeps what the operator typed).
    out.byRecipientText = await page.innerText("main");
    await shot(page, "messages-by-recipient");
    await submit(page, `[data-found-message="${input.message}"] [data-open-message]`);
    out.timeline = {
      events: await page.locator("[data-table=events] tbody tr").evaluateAll((rows) =>
        rows.map((r) => ({ event: r.getAttribute("data-event"), precedence: r.getAttribute("data-precedence"), version: r.getAttribute("data-version"), text: r.innerText }))),
      sinks: await page.locator("[data-notifications-sink]").allInnerTexts(),
      notifications: await page.locator("[data-notification]").evaluateAll((rows) => rows.map((r) => r.getAttribute("data-notification"))),
      workflowLinks: await page.locator("[data-workflow-link]").evaluateAll((as) => as.map((a) => a.getAttribute("href"))),
    };

    // A message, found by provider and id, with its events.
    await page.goto(input.base + "/console/messages");
    await page.selectOption("select[name=provider]", input.provider);
    await page.fill("input[name=id]", input.message);
    await submit(page, "[data-action=find-message]");
    out.message = {
      status: await page.locator("[data-status]").innerText(),
      recipient: await page.locator("[data-recipient]").innerText(),
      events: await page.locator("[data-table=events] tbody tr").evaluateAll((rows) => rows.map((r) => r.getAttribute("data-event"))),
      notifications: await page.locator("[data-table=notifications] tbody tr").count(),
    };
    await shot(page, "messages");
    // The erased address's message: found, its recipient gone.
    await visit(page, "erasedMessage", `/console/messages?provider=${encodeURIComponent(input.provider)}&id=${encodeURIComponent(input.erasedMessage)}`);

    // Suppressions: a check of the simulated recipient shows it whole only in the lift form.
    await visit(page, "suppressionCheck", `/console/suppressions?address=${encodeURIComponent(input.recipient)}`);

    // A redelivery: the dry run's count first, then the real one.
    await page.goto(input.base + "/console/sinks");
    const sink = page.locator(`[data-sink="${input.sink}"]`);
    await sink.locator("select[name=status]").selectOption("failed");
    await submit(page, `[data-sink="${input.sink}"] [data-action=redeliver-dry-run]`);
    out.dryRun = {
      count: Number(await page.locator("[data-dry-run]").getAttribute("data-dry-run")),
      notice: await page.locator("[data-notice]").innerText(),
    };
    await shot(page, "sinks");
    out.redeliverStatus = await submit(page, "[data-action=redeliver]");
    out.redeliverNotice = await page.locator("[data-notice]").innerText();

    // Every other action once, each recorded in the audit trail via the console: pause and
    // resume a sink, retry the refused request (still refused), a redrive, a suppression lift.
    out.acts = {};
    await page.goto(input.base + "/console/sinks");
    out.acts.pause = await submit(page, `[data-sink="${input.backupSink}"] [data-action=pause]`);
    out.acts.resume = await submit(page, `[data-sink="${input.backupSink}"] [data-action=resume]`);
    await page.goto(input.base + "/console/rejected");
    const before = consoleErrors.length;
    out.acts.retry = await submit(page, "[data-action=retry]");
    // Chromium reports the 409 page as a resource error: expected here, and only here.
    out.retryErrors = consoleErrors.splice(before);
    await page.goto(input.base + "/console/reconciliation");
    out.acts.redrive = await submit(page, "[data-action=redrive]");
    await page.goto(input.base + `/console/suppressions?address=${encodeURIComponent(input.recipient)}`);
    await page.fill("form[action='/console/suppressions/lift'] input[name=reason]", "console test");
    out.acts.lift = await submit(page, "[data-action=lift]");
    // The Audit page shows them.
    await visit(page, "auditAfter", "/console/audit");
    out.audit = await page.locator("[data-audit]").evaluateAll((rows) =>
      rows.map((r) => ({ action: r.getAttribute("data-audit-action"), via: r.getAttribute("data-via"), text: r.innerText })));
    await shot(page, "audit");
    await visit(page, "eventsAfter", "/console/events");
    await shot(page, "events");

    // Forged POSTs with this session's cookie: no CSRF token, and a wrong one.
    const pause = input.base + "/console/sinks/pause";
    out.forged = {
      noCSRF: (await ctx.request.post(pause, { form: { sink: input.sink }, maxRedirects: 0 })).status(),
      badCSRF: (await ctx.request.post(pause, { form: { sink: input.sink, csrf: "forged" }, maxRedirects: 0 })).status(),
    };

    // Sign out: the sign-in page, and the console is closed again.
    await submit(page, "[data-action=sign-out]");
    out.afterSignOut = new URL(page.url()).pathname;
    await page.goto(input.base + "/console/sinks");
    out.afterSignOutSinks = new URL(page.url()).pathname;
    out.consoleErrors = consoleErrors;

    // A read-only token: no action button anywhere, and an action refused whatever it sends.
    const ro = await browser.newContext();
    const rop = await ro.newPage();
    await rop.goto(input.base + "/console/login");
    await rop.fill("input[name=token]", input.viewer);
    await submit(rop, "form.login button[type=submit]");
    out.viewer = { pages: {}, menu: await rop.locator("nav a").allInnerTexts() };
    for (const [name, path] of Object.entries(pages)) {
      const resp = await rop.goto(input.base + path);
      out.viewer.pages[name] = {
        status: resp.status(),
        actions: await rop.locator("[data-action]").evaluateAll((els) => els.map((e) => e.getAttribute("data-action"))),
      };
    }
    await rop.goto(input.base + `/console/suppressions?address=${encodeURIComponent(input.recipient)}`);
    out.viewer.checkActions = await rop.locator("[data-action]").evaluateAll((els) => els.map((e) => e.getAttribute("data-action")));
    await rop.goto(input.base + "/console/sinks");
    const csrf = await rop.locator("form.signout input[name=csrf]").getAttribute("value");
    const refused = await ro.request.post(pause, { form: { sink: input.sink, csrf }, maxRedirects: 0 });
    out.viewer.pauseWithItsCSRF = refused.status();
    out.viewer.pauseBody = (await refused.text()).includes("sinks:write");
    await ro.close();
  } finally {
    await browser.close();
  }
  process.stdout.write(JSON.stringify(out) + "\n");
})().catch((err) => {
  process.stderr.write(String(err && err.stack ? err.stack : err) + "\n");
  process.exit(1);
});
