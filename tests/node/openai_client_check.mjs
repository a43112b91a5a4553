// Drives `trellis serve` with the official `openai` npm client (v4), used as any application
// would: `new OpenAI({ baseURL, apiKey })`, nothing patched. Each check records pass/fail; the
// script prints one JSON summary on stdout and exits 1 if any check failed (2 on a setup error).
//
//   node tests/node/openai_client_check.mjs BASE_URL MODEL [API_KEY]
//
// BASE_URL is the server's /v1 root (http://127.0.0.1:PORT/v1). Without arguments it reads
// TRELLIS_BASE_URL, TRELLIS_MODEL and OPENAI_API_KEY. The `openai` package is looked up in
// TRELLIS_NODE_MODULES, then in each NODE_PATH entry, then beside this script
// (scripts/setup-node-client.sh installs it into build/node/node_modules).
import { createRequire } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const baseURL = process.argv[2] ?? process.env.TRELLIS_BASE_URL;
const model = process.argv[3] ?? process.env.TRELLIS_MODEL;
const apiKey = process.argv[4] ?? process.env.OPENAI_API_KEY ?? 'no-key';

// Every request is bounded, and so is the whole run: a hung server fails the check, never hangs it.
const REQUEST_OPTIONS = { timeout: 20000, maxRetries: 0 };
const watchdog = setTimeout(() => {
  console.log(JSON.stringify({ ok: false, error: 'timed out after 50 s' }));
  process.exit(2);
}, 50000);

async function loadOpenAI() {
  // ESM imports ignore NODE_PATH, so resolve the package by hand from each candidate folder.
  const dirs = [];
  if (process.env.TRELLIS_NODE_MODULES) dirs.push(process.env.TRELLIS_NODE_MODULES);
  for (const entry of (process.env.NODE_PATH ?? '').split(path.delimiter)) {
    if (entry) dirs.push(entry);
  }
  for (const dir of dirs) {
    try {
      const resolved = createRequire(path.join(path.resolve(dir), 'index.js')).resolve('openai');
      const mod = await import(pathToFileURL(resolved).href);
      return mod.OpenAI ?? mod.default;
    } catch {
      // not in this folder; try the next
    }
  }
  const mod = await import('openai');
  return mod.OpenAI ?? mod.default;
}

const results = [];
async function check(name, body) {
  try {
    const detail = await body();
    results.push({ name, ok: true, ...(detail === undefined ? {} : { detail }) });
  } catch (err) {
    results.push({ name, ok: false, error: String(err?.stack ?? err) });
  }
}

function expect(condition, message) {
  if (!condition) throw new Error(message);
}

async function main() {
  if (!baseURL || !model) {
    console.log(JSON.stringify({ ok: false, error: 'usage: openai_client_check.mjs BASE_URL MODEL [API_KEY]' }));
    return 2;
  }
  let OpenAI;
  try {
    OpenAI = await loadOpenAI();
  } catch (err) {
    console.log(JSON.stringify({ ok: false, error: `cannot load the openai package: ${err}` }));
    return 2;
  }
  const client = new OpenAI({ baseURL, apiKey });
  const prompt = 'Once upon a time';
  const messages = [{ role: 'user', content: 'Tell me a story.' }];
  let completionText;
  let chatText;

  await check('completions.create', async () => {
    const r = await client.completions.create(
      { model, prompt, max_tokens: 12, temperature: 0 }, REQUEST_OPTIONS);
    expect(r.object === 'text_completion', `object is ${r.object}`);
    expect(r.choices.length === 1, `${r.choices.length} choices`);
    expect(typeof r.choices[0].text === 'string', 'choices[0].text is not a string');
    expect(['stop', 'length'].includes(r.choices[0].finish_reason),
      `finish_reason ${r.choices[0].finish_reason}`);
    expect(r.usage.prompt_tokens > 0, 'usage.prompt_tokens is not positive');
    expect(r.usage.completion_tokens > 0 && r.usage.completion_tokens <= 12,
      `usage.completion_tokens ${r.usage.completion_tokens}`);
    completionText = r.choices[0].text;
    return { text: completionText, usage: r.usage };
  });

  await check('chat.completions.create', async () => {
    const r = await client.chat.completions.create(
      { model, messages, max_tokens: 12, temperature: 0 }, REQUEST_OPTIONS);
    expect(r.object === 'chat.completion', `object is ${r.object}`);
    const message = r.choices[0].message;
    expect(message.role === 'assistant', `role ${message.role}`);
    expect(typeof message.content === 'string', 'choices[0].message.content is not a string');
    expect(typeof r.usage?.prompt_tokens_details?.cached_tokens === 'number',
      'usage.prompt_tokens_details.cached_tokens is not a number');
    chatText = message.content;
    return { content: chatText, usage: r.usage };
  });

  await check('chat.completions.create stream with usage', async () => {
    const stream = await client.chat.completions.create(
      { model, messages, max_tokens: 12, temperature: 0, stream: true,
        stream_options: { include_usage: true } }, REQUEST_OPTIONS);
    let text = '';
    let usage = null;
    let finishReason = null;
    let chunks = 0;
    for await (const chunk of stream) {
      ++chunks;
      expect(chunk.object === 'chat.completion.chunk', `chunk object ${chunk.object}`);
      for (const choice of chunk.choices) {
        text += choice.delta?.content ?? '';
        if (choice.finish_reason) finishReason = choice.finish_reason;
      }
      if (chunk.usage) {
        expect(chunk.choices.length === 0, 'the usage chunk has choices');
        usage = chunk.usage;
      }
    }
    expect(usage !== null, 'no usage chunk arrived');
    expect(usage.completion_tokens > 0, `usage.completion_tokens ${usage.completion_tokens}`);
    expect(finishReason !== null, 'no finish_reason in the stream');
    if (chatText !== undefined) {
      expect(text === chatText, `streamed ${JSON.stringify(text)} != ${JSON.stringify(chatText)}`);
    }
    return { chunks, text, usage };
  });

  await check('completions.create stream', async () => {
    const stream = await client.completions.create(
      { model, prompt, max_tokens: 12, temperature: 0, stream: true }, REQUEST_OPTIONS);
    let text = '';
    let chunks = 0;
    for await (const chunk of stream) {
      ++chunks;
      for (const choice of chunk.choices) text += choice.text ?? '';
    }
    expect(chunks > 0, 'no chunks');
    if (completionText !== undefined) {
      expect(text === completionText,
        `streamed ${JSON.stringify(text)} != ${JSON.stringify(completionText)}`);
    }
    return { chunks, text };
  });

  await check('n: 2', async () => {
    const r = await client.chat.completions.create(
      { model, messages, max_tokens: 6, temperature: 0.8, seed: 3, n: 2 }, REQUEST_OPTIONS);
    expect(r.choices.length === 2, `${r.choices.length} choices`);
    const indexes = r.choices.map((c) => c.index).sort();
    expect(indexes[0] === 0 && indexes[1] === 1, `indexes ${indexes}`);
    for (const c of r.choices) expect(typeof c.message.content === 'string', 'content not a string');
    return { contents: r.choices.map((c) => c.message.content) };
  });

  await check('models.list', async () => {
    const ids = [];
    for await (const m of client.models.list(REQUEST_OPTIONS)) ids.push(m.id);
    expect(ids.includes(model), `models ${JSON.stringify(ids)} lack ${model}`);
    return { ids };
  });

  await check('unknown model is a 404 APIError', async () => {
    try {
      await client.chat.completions.create(
        { model: 'no-such-model', messages, max_tokens: 2 }, REQUEST_OPTIONS);
    } catch (err) {
      expect(err instanceof OpenAI.APIError, `threw ${err?.constructor?.name}: ${err}`);
      expect(err.status === 404, `status ${err.status}`);
      expect(typeof err.message === 'string' && err.message.length > 0, 'no message');
      return { status: err.status, code: err.code, message: err.message };
    }
    throw new Error('the request succeeded');
  });

  const ok = results.every((r) => r.ok);
  console.log(JSON.stringify({ ok, passed: results.filter((r) => r.ok).length,
    failed: results.filter((r) => !r.ok).map((r) => r.name), results }, null, 2));
  return ok ? 0 : 1;
}

const code = await main();
clearTimeout(watchdog);
process.exit(code);
