// Drives the chat page of a running `trellis serve` in headless Chromium (puppeteer-core), as a
// user would: keyboard and clicks on the page, nothing injected into the app. Each check records
// pass/fail; the script prints one JSON summary on stdout and exits 1 if any check failed (2 on a
// setup error). Every wait is bounded by an event the page shows, never by elapsed time alone.
//
//   node tests/browser/chat_page_check.mjs MODE BASE_URL OUT_DIR [API_KEY]
//
// MODE chat: a server without API keys started with a context of at least 32768 tokens (the stop
//            check streams a long greedy reply and stops it long before its end);
//      key:  a server started with --api-key API_KEY;
//      first-run: a server started as `scripts/run.sh serve` starts it (no --chat-template) on a
//            model synthesized as the default one is, which carries its preset's chat template.
//      models: a server of several models: two generation models named one and two, and an
//            embedding model named enc.
// The `puppeteer-core` package is looked up in TRELLIS_NODE_MODULES, then in each NODE_PATH entry
// (scripts/setup-browser-test.sh installs it into build/node/node_modules); Chromium in
// $CHROMIUM, else chromium or chromium-browser on the PATH. Screenshots go to OUT_DIR.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const [mode, baseURL, outDir, apiKey] = process.argv.slice(2);
const WAIT_MS = 30000;  // bounds each wait on a broken page or server; a working one is far quicker

const watchdog = setTimeout(() => {
  console.log(JSON.stringify({ ok: false, error: 'timed out after 170 s' }));
  process.exit(2);
}, 170000);

function setupError(message) {
  console.log(JSON.stringify({ ok: false, error: message }));
  process.exit(2);
}

if (!['chat', 'key', 'first-run', 'models'].includes(mode) || !baseURL || !outDir ||
    (mode === 'key' && !apiKey)) {
  setupError('usage: chat_page_check.mjs chat|key|first-run|models BASE_URL OUT_DIR [API_KEY]');
}

async function loadPuppeteer() {
  const dirs = [];
  if (process.env.TRELLIS_NODE_MODULES) dirs.push(process.env.TRELLIS_NODE_MODULES);
  for (const entry of (process.env.NODE_PATH ?? '').split(path.delimiter)) {
    if (entry) dirs.push(entry);
  }
  for (const dir of dirs) {
    try {
      const resolved = createRequire(path.join(path.resolve(dir), 'index.js')).resolve('puppeteer-core');
      const mod = await import(pathToFileURL(resolved).href);
      return mod.default ?? mod;
    } catch {
      // not in this folder; try the next
    }
  }
  const mod = await import('puppeteer-core');
  return mod.default ?? mod;
}

function findChromium() {
  if (process.env.CHROMIUM) return process.env.CHROMIUM;
  for (const name of ['chromium', 'chromium-browser', 'google-chrome']) {
    try {
      return execFileSync('sh', ['-c', `command -v ${name}`], { encoding: 'utf8' }).trim();
    } catch {
      // not installed under this name
    }
  }
  return null;
}

const results = [];
async function check(name, body) {
  try {
    const detail = await body();
    results.push({ name, ok: true, ...(detail === undefined ? {} : { detail }) });
  } catch (err) {
    results.push({ name, ok: false, error: String(err?.stack ?? err) });
    await shot(`failed-${name.replace(/[^\w-]+/g, '-')}`).catch(() => {});
  }
}

function expect(condition, message) {
  if (!condition) throw new Error(message);
}

let browser;
let page;
const pageErrors = [];

async function shot(name) {
  await page.screenshot({ path: path.join(outDir, `${name}.png`), fullPage: false });
}

// Waits (bounded) until `fn` (run in the page) returns a truthy value, and returns it.
async function until(fn, what, ...args) {
  try {
    const handle = await page.waitForFunction(fn, { timeout: WAIT_MS, polling: 50 }, ...args);
    return await handle.jsonValue();
  } catch (err) {
    throw new Error(`waiting for ${what}: ${err.message}`);
  }
}

// The server's /metrics, read from Node (not through the page) as {name: value} of unlabelled
// samples plus `cancelled` (the finished requests with finish_reason="cancelled").
async function serverMetrics() {
  const text = await (await fetch(new URL('/metrics', baseURL))).text();
  const values = {};
  for (const line of text.split('\n')) {
    const plain = /^trellis:(\w+) (\S+)$/.exec(line);
    if (plain) values[plain[1]] = Number(plain[2]);
    const cancelled = /^trellis:requests_finished_total\{finish_reason="cancelled"\} (\S+)$/.exec(line);
    if (cancelled) values.cancelled = Number(cancelled[1]);
  }
  return values;
}

async function setField(selector, value) {
  await page.click(selector, { count: 3 });
  await page.$eval(selector, (el) => { el.value = ''; });
  await page.type(selector, String(value));
}

async function sendMessage(text) {
  await page.focus('#composer-input');
  await page.type('#composer-input', text);
  await page.keyboard.press('Enter');
}

function lastReplyState() {
  const replies = document.querySelectorAll('#messages article.assistant');
  const last = replies[replies.length - 1];
  if (!last) return null;
  const stat = (name) => last.querySelector(`[data-stat="${name}"]`)?.textContent ?? null;
  return {
    count: replies.length,
    streaming: last.classList.contains('streaming'),
    text: last.querySelector('.body').textContent,
    prompt: stat('prompt'),
    cached: stat('cached'),
    ttft: stat('ttft'),
    speed: stat('speed'),
    finish: stat('finish'),
  };
}

// Waits until the reply after `before` assistant messages has finished, and returns its state.
async function waitForReply(before) {
  await until(
    (n) => {
      const replies = document.querySelectorAll('#messages article.assistant');
      return replies.length > n && !replies[replies.length - 1].classList.contains('streaming');
    },
    'the reply to finish',
    before,
  );
  return page.evaluate(lastReplyState);
}

const numberIn = (text) => Number(/(\d+)/.exec(text ?? '')?.[1] ?? NaN);
const replyCount = () => page.$$eval('#messages article.assistant', (a) => a.length);

async function chatChecks() {
  await check('page loads and connects', async () => {
    const response = await page.goto(baseURL, { waitUntil: 'load' });
    expect(response.status() === 200, `GET / answered ${response.status()}`);
    const csp = response.headers()['content-security-policy'] ?? '';
    expect(csp.includes("default-src 'self'"), `no CSP header: ${csp}`);
    await until(() => document.querySelector('#server-status').textContent === 'ready', 'ready');
    const model = await page.$eval('#model-name', (e) => e.textContent);
    expect(model === 'tiny', `model name shown: ${model}`);
    await until(() => document.querySelector('[data-metric="running"]').textContent === '0',
                'the metrics panel');
    await shot('empty-chat');
  });

  const typed = 'Hello <script>window.__pwned = 1</script> <img src=x onerror="window.__pwned = 2">';
  let firstCached = NaN;
  await check('a message gets a streamed reply with its figures', async () => {
    await setField('#temperature', 0);
    await setField('#max-tokens', 16);
    await sendMessage(typed);
    const reply = await waitForReply(0);
    expect(reply.text.length > 0, 'the reply is empty');
    expect(numberIn(reply.prompt) > 0, `prompt tokens: ${reply.prompt}`);
    expect(reply.cached !== null, 'no cached figure');
    expect(reply.ttft !== null, 'no time to first token');
    firstCached = numberIn(reply.cached);
    return reply;
  });

  await check('a typed <script> is shown as text', async () => {
    const user = await page.$eval('#messages article.user .body', (b) => ({
      text: b.textContent,
      elements: b.querySelectorAll('*').length,
    }));
    expect(user.text === typed, `shown: ${user.text}`);
    expect(user.elements === 0, 'the message made elements');
    const pwned = await page.evaluate(() => window.__pwned);
    expect(pwned === undefined, `injected code ran: ${pwned}`);
    expect((await page.$$('#messages script, #messages img')).length === 0, 'script/img in the log');
  });

  await check('the second message of a conversation is served from the prefix cache', async () => {
    await sendMessage('Tell me more.');
    const reply = await waitForReply(1);
    const cached = numberIn(reply.cached);
    expect(cached > 0 && cached > firstCached, `cached ${firstCached} then ${cached}`);
    expect(numberIn(reply.prompt) > cached, `prompt ${reply.prompt}, cached ${cached}`);
    await shot('second-reply-cached');
    return { first: firstCached, second: cached };
  });

  await check('regenerate replaces the last reply', async () => {
    await page.click('#regenerate');
    const reply = await waitForReply(1);  // the old reply goes, a new one comes
    expect(reply.count === 2, `${reply.count} replies after regenerating`);
    // The same prompt as before: now entirely cached but its last token.
    expect(numberIn(reply.cached) === numberIn(reply.prompt) - 1,
           `prompt ${reply.prompt}, cached ${reply.cached}`);
  });

  await check('stop ends a streaming reply and frees its server resources', async () => {
    const before = await serverMetrics();
    await page.click('#new-chat');
    await until(() => document.querySelectorAll('#messages article').length === 0, 'a new chat');
    await setField('#max-tokens', 30000);
    await sendMessage('Write a very long story.');
    // Text on screen while the reply still streams (the greedy reply runs to max tokens, far
    // longer than this takes).
    await until(() => {
      const a = document.querySelector('#messages article.assistant');
      return a && a.classList.contains('streaming') && a.querySelector('.body').textContent.length > 20;
    }, 'streamed text');
    expect(!(await page.$eval('#stop', (b) => b.hidden)), 'no Stop button while streaming');
    await shot('streaming');
    await page.click('#stop');
    const reply = await waitForReply(0);
    expect(reply.finish === 'stopped', `finish: ${reply.finish}`);
    expect(reply.text.length > 20, 'the partial reply was lost');
    expect(/tokens\/s/.test(reply.speed ?? ''), `speed: ${reply.speed}`);
    // The server cancels the request when the connection closes: poll until it shows.
    let after = await serverMetrics();
    for (let i = 0; i < 200 && !(after.num_requests_running === 0 && after.kv_blocks_used === 0 &&
                                 after.cancelled > before.cancelled); i++) {
      await new Promise((r) => setTimeout(r, 100));
      after = await serverMetrics();
    }
    expect(after.num_requests_running === 0, `running: ${after.num_requests_running}`);
    expect(after.kv_blocks_used === 0, `blocks in use: ${after.kv_blocks_used}`);
    expect(after.cancelled === before.cancelled + 1, `cancelled ${before.cancelled} -> ${after.cancelled}`);
    await until(() => document.querySelector('[data-metric="running"]').textContent === '0' &&
                      document.querySelector('[data-metric="used"]').textContent.startsWith('0 /'),
                'the panel to show the freed pool');
    await shot('stopped');
    return { blocks_cached: after.kv_blocks_cached, blocks_free: after.kv_blocks_free };
  });

  await check('switching conversations shows each one', async () => {
    await setField('#max-tokens', 16);
    const titles = await page.$$eval('#conversation-list .conversation', (b) => b.map((x) => x.textContent));
    expect(titles.length === 2, `conversations: ${JSON.stringify(titles)}`);
    await page.click('#conversation-list li:nth-child(2) .conversation');
    await until(() => document.querySelectorAll('#messages article.user').length === 2, 'the first chat');
    const first = await page.$eval('#messages article.user .body', (b) => b.textContent);
    expect(first === typed, `first chat shows: ${first}`);
    await page.click('#conversation-list li:nth-child(1) .conversation');
    await until(() => document.querySelectorAll('#messages article.user').length === 1, 'the second chat');
  });

  await check('conversations survive a reload', async () => {
    await page.reload({ waitUntil: 'load' });
    await until(() => document.documentElement.dataset.ready === 'true', 'the page');
    const titles = await page.$$eval('#conversation-list .conversation', (b) => b.map((x) => x.textContent));
    expect(titles.length === 2, `conversations after reload: ${JSON.stringify(titles)}`);
    const open = await page.$eval('#messages article.user .body', (b) => b.textContent);
    expect(open === 'Write a very long story.', `open chat after reload: ${open}`);
    const maxTokens = await page.$eval('#max-tokens', (i) => i.value);
    expect(maxTokens === '16', `max tokens after reload: ${maxTokens}`);
    await page.click('#conversation-list li:nth-child(2) .conversation');
    await until(() => document.querySelectorAll('#messages article.assistant').length === 2, 'its replies');
    const cached = await page.$$eval('#messages [data-stat="cached"]', (s) => s.map((x) => x.textContent));
    expect(cached.length === 2, `figures after reload: ${JSON.stringify(cached)}`);
  });

  await check('the Markdown renderer builds safe nodes', async () => {
    const out = await page.evaluate(async () => {
      const { renderMarkdown } = await import('/chat/markdown.js');
      const box = document.createElement('div');
      box.append(renderMarkdown([
        '# Title',
        '<script>window.__pwned = 3</script>',
        '<img src=x onerror="window.__pwned = 4"> **bold** and *it* and `x<b>`',
        '[ok](https://example.com/a) [bad](javascript:alert(1)) [rel](/v1/models)',
        '- one',
        '- two',
        '',
        '```html',
        '<img src=x onerror="window.__pwned = 5">',
        '```',
      ].join('\n')));
      document.body.append(box);  // live in the document: any handler would run now
      await new Promise((r) => setTimeout(r, 50));
      const links = [...box.querySelectorAll('a')].map((a) => ({ href: a.href, rel: a.rel }));
      const attrs = [...box.querySelectorAll('*')].flatMap((e) => [...e.attributes].map((a) => a.name));
      const result = {
        text: box.textContent,
        dangerous: box.querySelectorAll('script, img, iframe, object').length,
        handlers: attrs.filter((n) => n.startsWith('on')),
        links,
        strong: box.querySelector('strong')?.textContent,
        em: box.querySelector('em')?.textContent,
        inlineCode: box.querySelector('p code')?.textContent,
        items: box.querySelectorAll('ul > li').length,
        heading: box.querySelector('h3')?.textContent,
        block: box.querySelector('pre code')?.textContent,
        pwned: window.__pwned,
      };
      box.remove();
      return result;
    });
    expect(out.dangerous === 0 && out.handlers.length === 0, `elements made: ${JSON.stringify(out)}`);
    expect(out.pwned === undefined, `injected code ran: ${out.pwned}`);
    expect(out.text.includes('<script>window.__pwned = 3</script>'), 'the script is not shown as text');
    expect(out.text.includes('<img src=x onerror="window.__pwned = 4">'), 'the img is not shown as text');
    expect(out.links.length === 1 && out.links[0].href === 'https://example.com/a' &&
           out.links[0].rel.includes('noopener'), `links: ${JSON.stringify(out.links)}`);
    expect(out.text.includes('[bad](javascript:alert(1))'), 'a javascript: link is not plain text');
    expect(out.strong === 'bold' && out.em === 'it' && out.inlineCode === 'x<b>',
           `inline: ${JSON.stringify(out)}`);
    expect(out.items === 2 && out.heading === 'Title', `blocks: ${JSON.stringify(out)}`);
    expect(out.block === '<img src=x onerror="window.__pwned = 5">', `code block: ${out.block}`);
  });

  await check('phone-sized window', async () => {
    await page.setViewport({ width: 390, height: 800 });
    expect(!(await page.$eval('#sidebar', (s) => s.checkVisibility())), 'the sidebar covers the chat');
    await page.click('#toggle-sidebar');
    await until(() => document.querySelector('#sidebar').checkVisibility(), 'the sidebar to open');
    await shot('phone-sidebar');
    await page.keyboard.press('Escape');
    await until(() => !document.querySelector('#sidebar').checkVisibility(), 'the sidebar to close');
    await shot('phone-chat');
  });
}

async function keyChecks() {
  await check('a server with a key asks for one', async () => {
    const response = await page.goto(baseURL, { waitUntil: 'load' });
    expect(response.status() === 200, `GET / answered ${response.status()} without a key`);
    await until(() => document.querySelector('#key-dialog').open, 'the key dialog');
    const message = await page.$eval('#key-message', (e) => e.textContent);
    expect(/requires an API key/.test(message), `message: ${message}`);
    await shot('key-required');
  });

  await check('a wrong key is refused with a clear message', async () => {
    await page.type('#key-input', 'wrong-key');
    await page.keyboard.press('Enter');
    await until(() => document.querySelector('#key-dialog').open &&
                      /did not accept/.test(document.querySelector('#key-message').textContent),
                'the refusal');
    const message = await page.$eval('#key-message', (e) => e.textContent);
    expect(/incorrect API key/.test(message), `message: ${message}`);
    await shot('key-wrong');
  });

  await check('the right key lets the chat work, and is kept', async () => {
    await page.type('#key-input', apiKey);
    await page.click('#key-save');
    await until(() => !document.querySelector('#key-dialog').open &&
                      document.querySelector('#server-status').textContent === 'ready', 'ready');
    await setField('#temperature', 0);
    await setField('#max-tokens', 8);
    await sendMessage('Hi');
    const reply = await waitForReply(0);
    expect(reply.text.length > 0 && reply.finish !== 'failed', `reply: ${JSON.stringify(reply)}`);
    await page.reload({ waitUntil: 'load' });
    await until(() => document.querySelector('#server-status').textContent === 'ready', 'ready again');
    expect(!(await page.$eval('#key-dialog', (d) => d.open)), 'asked again after a reload');
  });

  await check('a key refused while sending is asked for, then the reply is sent', async () => {
    // Another tab saves a key the server refuses; this tab picks it up (storage event) and its
    // next message gets a 401: the page asks for the key and then sends the reply it owes.
    const other = await browser.newPage();
    await other.goto(baseURL, { waitUntil: 'load' });
    await other.evaluate(() => localStorage.setItem('trellis.chat.apiKey', JSON.stringify('revoked')));
    await other.close();
    await page.bringToFront();
    const before = await replyCount();
    await sendMessage('One more');
    await until(() => document.querySelector('#key-dialog').open &&
                      /did not accept/.test(document.querySelector('#key-message').textContent),
                'the key dialog');
    expect((await replyCount()) === before, 'a refused reply stayed in the conversation');
    await page.type('#key-input', apiKey);
    await page.keyboard.press('Enter');
    const reply = await waitForReply(before);
    expect(reply.finish !== 'failed' && reply.text.length > 0, `reply: ${JSON.stringify(reply)}`);
    const users = await page.$$eval('#messages article.user .body', (b) => b.map((x) => x.textContent));
    expect(users.at(-1) === 'One more' && users.filter((u) => u === 'One more').length === 1,
           `messages: ${JSON.stringify(users)}`);
  });

  await check('a key that stops working is asked for again when sending', async () => {
    await page.evaluate(() => localStorage.setItem('trellis.chat.apiKey', JSON.stringify('stale')));
    await page.reload({ waitUntil: 'load' });
    await until(() => document.querySelector('#key-dialog').open, 'the key dialog');
    const message = await page.$eval('#key-message', (e) => e.textContent);
    expect(/did not accept/.test(message), `message: ${message}`);
    await page.type('#key-input', apiKey);
    await page.keyboard.press('Enter');
    await until(() => document.querySelector('#server-status').textContent === 'ready', 'ready');
    const before = await replyCount();
    await sendMessage('Again');
    const reply = await waitForReply(before);
    expect(reply.finish !== 'failed', `reply: ${JSON.stringify(reply)}`);
  });
}

// What a newcomer does first: open the page and say hello, with the page's default settings.
async function firstRunChecks() {
  await check('the page of a server started without flags is ready', async () => {
    const response = await page.goto(baseURL, { waitUntil: 'load' });
    expect(response.status() === 200, `GET / answered ${response.status()}`);
    await until(() => document.querySelector('#server-status').textContent === 'ready', 'ready');
  });

  await check('a first message gets an assistant reply', async () => {
    await setField('#max-tokens', 16);
    await sendMessage('Hello! Who are you?');
    const reply = await waitForReply(0);
    expect(reply.finish !== 'failed', `the reply failed: ${JSON.stringify(reply)}`);
    expect(reply.text.length > 0, 'the reply is empty');
    expect(numberIn(reply.prompt) > 0, `prompt tokens: ${reply.prompt}`);
    const error = await page.$eval('#error', (e) => (e.hidden ? '' : e.textContent));
    expect(error === '', `error shown: ${error}`);
    await shot('first-run-reply');
    return reply;
  });
}

// A server of several models: the menu offers those that chat, and a reply comes from the one
// chosen.
async function modelsChecks() {
  const sentModels = [];
  page.on('request', (request) => {
    if (request.method() === 'POST' && request.url().endsWith('/v1/chat/completions'))
      sentModels.push(JSON.parse(request.postData() ?? '{}').model);
  });
  await check('the menu lists the models that chat', async () => {
    await page.goto(baseURL, { waitUntil: 'load' });
    await until(() => document.querySelector('#server-status').textContent === 'ready', 'ready');
    const options = await page.$$eval('#model-name option', (o) => o.map((x) => x.value));
    expect(JSON.stringify(options) === '["one","two"]', `options: ${JSON.stringify(options)}`);
    const disabled = await page.$eval('#model-name', (e) => e.disabled);
    expect(!disabled, 'the menu is disabled');
  });

  await check('a reply comes from the model chosen', async () => {
    await page.select('#model-name', 'two');
    await setField('#max-tokens', 8);
    await sendMessage('Hello, model two');
    const reply = await waitForReply(0);
    expect(reply.finish !== 'failed' && reply.text.length > 0, `reply: ${JSON.stringify(reply)}`);
    expect(sentModels.at(-1) === 'two', `requests named: ${JSON.stringify(sentModels)}`);
    await shot('models-two');
  });
}

async function main() {
  const chromium = findChromium();
  if (!chromium) setupError('chromium not found (scripts/install-deps.sh installs it)');
  let puppeteer;
  try {
    puppeteer = await loadPuppeteer();
  } catch (err) {
    setupError(`puppeteer-core not found (scripts/setup-browser-test.sh): ${err.message}`);
  }
  fs.mkdirSync(outDir, { recursive: true });
  const profile = fs.mkdtempSync(path.join(outDir, '.profile-'));
  browser = await puppeteer.launch({
    executablePath: chromium,
    headless: true,
    userDataDir: profile,
    // --no-sandbox: CI runs as root, where Chromium's sandbox cannot start.
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run'],
  });
  try {
    page = await browser.newPage();
    await page.setViewport({ width: 1200, height: 800 });
    page.on('pageerror', (err) => pageErrors.push(String(err)));
    page.on('console', (msg) => {
      if (msg.type() === 'error') pageErrors.push(msg.text());
    });
    if (mode === 'chat') await chatChecks();
    else if (mode === 'key') await keyChecks();
    else if (mode === 'models') await modelsChecks();
    else await firstRunChecks();
    await check('no script errors on the page', async () => {
      // A refused request (401, 404) is logged by the browser itself; script errors are not ok.
      const errors = pageErrors.filter((e) => !/Failed to load resource/.test(e));
      expect(errors.length === 0, errors.join('\n'));
    });
  } finally {
    await browser.close();
    fs.rmSync(profile, { recursive: true, force: true });
  }
}

main()
  .catch((err) => results.push({ name: 'setup', ok: false, error: String(err?.stack ?? err) }))
  .finally(() => {
    clearTimeout(watchdog);
    const failed = results.filter((r) => !r.ok);
    console.log(JSON.stringify({ ok: failed.length === 0 && results.length > 0, mode,
                                 passed: results.length - failed.length, failed: failed.length,
                                 results }, null, 1));
    process.exit(failed.length === 0 ? 0 : 1);
  });
