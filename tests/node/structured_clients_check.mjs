// Drives `trellis serve`'s structured outputs and tool calls with the clients applications use,
// unchanged, from npm: the official `openai` client (zodResponseFormat with .parse, tools, streamed
// tool calls, runTools), the Vercel AI SDK (`ai` v4 with `@ai-sdk/openai-compatible`:
// generateObject, generateText with tools and maxSteps) and LangChain (`@langchain/openai`:
// withStructuredOutput, bindTools). Every constrained output is also validated by Ajv (an
// independent JSON Schema validator) against the very schema the client sent, taken from the
// request body, besides the client's own zod parsing.
//
//   node tests/node/structured_clients_check.mjs BASE_URL MODEL [API_KEY]
//
// BASE_URL is the server's /v1 root (http://127.0.0.1:PORT/v1). Prints `PASS name` / `FAIL name:
// why` (a failure also shows the requests of that check: URL, body and any error response, so a
// field the server refused is named with the body that carried it) and `SKIP name: why` per check,
// then one JSON summary line {"ok", "passed", "failed", "skipped"}. Exit status: 0 when every
// check passed, 1 when any failed, 2 on a setup error (a package absent). The packages are looked
// up in TRELLIS_NODE_MODULES, then each NODE_PATH entry, then build/node/node_modules of the source
// tree (scripts/setup-node-client.sh installs them there). TRELLIS_CLIENTS_TRACE=1 prints every
// request body as it is sent.
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { moduleDirs } from './module_dirs.mjs';

const baseURL = process.argv[2] ?? process.env.TRELLIS_BASE_URL;
const modelName = process.argv[3] ?? process.env.TRELLIS_MODEL;
const apiKey = process.argv[4] ?? process.env.OPENAI_API_KEY ?? 'no-key';

// The replies are bounded (the tiny random model writes until the grammar or max_tokens ends it),
// so is every request, and so is the whole run: a hung server fails, never hangs the check.
const MAX_TOKENS = 300;
const REQUEST_TIMEOUT_MS = 60000;
const watchdog = setTimeout(() => {
  console.log('FAIL watchdog: the checks did not finish in 240 s');
  console.log(JSON.stringify({ ok: false, error: 'timed out after 240 s' }));
  process.exit(2);
}, 240000);

function setupError(message) {
  console.log(JSON.stringify({ ok: false, error: message }));
  clearTimeout(watchdog);
  process.exit(2);
}

// Every package is required (CommonJS) from one folder, so that all of them share one zod.
const PACKAGES = ['openai', 'openai/helpers/zod', 'zod', 'ajv', 'ajv-formats', 'ai',
  '@ai-sdk/openai-compatible', '@langchain/openai', '@langchain/core/tools'];
function loadPackages() {
  const dirs = moduleDirs();
  const problems = [];
  for (const dir of dirs) {
    const require = createRequire(path.join(path.resolve(dir), 'index.js'));
    try {
      const mods = Object.fromEntries(PACKAGES.map((name) => [name, require(name)]));
      // Read, not required: some packages' exports do not include their package.json.
      const version = (name) => JSON.parse(
        fs.readFileSync(path.join(path.resolve(dir), name, 'package.json'), 'utf8')).version;
      mods.versions = Object.fromEntries(['openai', 'zod', 'ajv', 'ai', '@ai-sdk/openai-compatible',
        '@langchain/openai', '@langchain/core'].map((name) => [name, version(name)]));
      return mods;
    } catch (err) {
      problems.push(`${dir}: ${err.message.split('\n')[0]}`);
    }
  }
  setupError('the npm packages are absent (run scripts/setup-node-client.sh build/node): ' +
    problems.join('; '));
  return null;
}

const mods = loadPackages();
const interop = (mod) => mod.default ?? mod;
const OpenAI = mods.openai.OpenAI ?? interop(mods.openai);
const { zodResponseFormat } = mods['openai/helpers/zod'];
const { z } = mods.zod;
const Ajv = interop(mods.ajv);
const addFormats = interop(mods['ajv-formats']);
const { generateObject, generateText, tool: aiTool } = mods.ai;
const { createOpenAICompatible } = mods['@ai-sdk/openai-compatible'];
const { ChatOpenAI } = mods['@langchain/openai'];
const { tool: lcTool } = mods['@langchain/core/tools'];

// --- what each check sent: a fetch that records the requests and the error responses ---------

let exchanges = [];  // of the running check: {url, body, status, error}
async function recordingFetch(url, init = {}) {
  const entry = { url: String(url?.url ?? url), body: typeof init.body === 'string' ? init.body : '' };
  exchanges.push(entry);
  if (process.env.TRELLIS_CLIENTS_TRACE === '1') {
    let compact = entry.body;
    try { compact = JSON.stringify(JSON.parse(entry.body)); } catch { /* not JSON: as sent */ }
    console.log(`  > ${entry.url} ${compact}`);
  }
  const response = await globalThis.fetch(url, init);
  entry.status = response.status;
  if (!response.ok) entry.error = await response.clone().text();
  return response;
}
const requestBodies = (pathSuffix) => exchanges
  .filter((e) => e.url.endsWith(pathSuffix) && e.body)
  .map((e) => JSON.parse(e.body));
const lastChatBody = () => {
  const bodies = requestBodies('/chat/completions');
  if (bodies.length === 0) throw new Error('no request to /chat/completions was recorded');
  return bodies[bodies.length - 1];
};

function clip(text, n = 3000) {
  return text.length <= n ? text : `${text.slice(0, n)}... (${text.length} characters)`;
}

const results = [];
async function check(name, body) {
  exchanges = [];
  try {
    const detail = await body();
    if (detail?.skip) {
      results.push({ name, skipped: true });
      console.log(`SKIP ${name}: ${detail.skip}`);
      return;
    }
    results.push({ name, ok: true });
    console.log(`PASS ${name}${detail === undefined ? '' : `: ${clip(JSON.stringify(detail), 600)}`}`);
  } catch (err) {
    results.push({ name, ok: false });
    console.log(`FAIL ${name}: ${String(err?.stack ?? err)}`);
    for (const e of exchanges) {
      console.log(`  request ${e.url} -> HTTP ${e.status ?? '(no response)'}`);
      console.log(`    body: ${clip(e.body)}`);
      if (e.error !== undefined) console.log(`    error response: ${clip(e.error)}`);
    }
  }
}

function expect(condition, message) {
  if (!condition) throw new Error(message);
}

// --- the independent validator ------------------------------------------------------------------

// A fresh Ajv per schema (draft-07, what zod-to-json-schema declares), formats checked, strict off
// (the schemas carry annotations Ajv's strict mode would reject).
function validateWithAjv(schema, value, what) {
  const ajv = new Ajv({ strict: false, allErrors: true, logger: false });
  addFormats(ajv);
  const validate = ajv.compile(schema);
  if (!validate(value)) {
    throw new Error(`${what}: ${JSON.stringify(value)} does not validate against ` +
      `${JSON.stringify(schema)}: ${JSON.stringify(validate.errors)}`);
  }
}

function validateWithZod(zodSchema, value, what) {
  const parsed = zodSchema.safeParse(value);
  if (!parsed.success) {
    throw new Error(`${what}: ${JSON.stringify(value)} fails the zod schema: ${parsed.error}`);
  }
}

// --- the schemas --------------------------------------------------------------------------------

const ROLES = ['admin', 'user', 'guest'];
// OpenAI's strict mode has no optional properties; its documented form is a nullable one.
const PersonForOpenAI = z.object({
  name: z.string().max(20),
  age: z.number().int().min(0).max(120),
  role: z.enum(ROLES),
  tags: z.array(z.string().max(10)).max(3).nullable(),
});
// A really optional property: absent from `required`.
const Person = z.object({
  name: z.string().max(20),
  age: z.number().int().min(0).max(120),
  role: z.enum(ROLES),
  tags: z.array(z.string().max(10)).max(3).optional(),
});

const WEATHER_PARAMETERS = {
  type: 'object',
  properties: {
    city: { type: 'string', maxLength: 24, description: 'The city' },
    unit: { type: 'string', enum: ['celsius', 'fahrenheit'] },
  },
  required: ['city', 'unit'],
  additionalProperties: false,
};
const ADD_PARAMETERS = {
  type: 'object',
  properties: {
    a: { type: 'integer', minimum: -1000, maximum: 1000 },
    b: { type: 'integer', minimum: -1000, maximum: 1000 },
  },
  required: ['a', 'b'],
  additionalProperties: false,
};
const OPENAI_TOOLS = [
  { type: 'function', function: { name: 'get_weather', description: 'The weather in a city',
    parameters: WEATHER_PARAMETERS } },
  { type: 'function', function: { name: 'add', description: 'Adds two integers',
    parameters: ADD_PARAMETERS } },
];
const TOOL_PARAMETERS = { get_weather: WEATHER_PARAMETERS, add: ADD_PARAMETERS };

const WeatherArgs = z.object({
  city: z.string().max(24).describe('The city'),
  unit: z.enum(['celsius', 'fahrenheit']),
});

const personPrompt = [{ role: 'user', content: 'Invent a user: a name, an age, a role, some tags.' }];
const toolPrompt = [
  { role: 'system', content: 'You are a helpful assistant. Use the tools.' },
  { role: 'user', content: 'What is the weather in Paris, and what is 2 + 3?' },
];

// The calls of a chat completion's message, each checked against its function's parameters (as
// the request sent them).
function checkToolCalls(calls, sentTools, what) {
  expect(Array.isArray(calls) && calls.length > 0, `${what}: no tool_calls`);
  const parameters = Object.fromEntries(sentTools.map((t) => [t.function.name, t.function.parameters]));
  calls.forEach((call, i) => {
    expect(call.type === undefined || call.type === 'function', `${what}: call ${i} type ${call.type}`);
    expect(typeof call.id === 'string' && call.id.length > 0, `${what}: call ${i} has no id`);
    const name = call.function?.name;
    expect(name in parameters, `${what}: call ${i} names ${JSON.stringify(name)}, not a tool`);
    let args;
    try {
      args = JSON.parse(call.function.arguments);
    } catch (err) {
      throw new Error(`${what}: call ${i} arguments ${JSON.stringify(call.function.arguments)} ` +
        `are not JSON: ${err.message}`);
    }
    validateWithAjv(parameters[name], args, `${what}: call ${i} (${name}) arguments`);
  });
  return calls.map((c) => ({ name: c.function.name, arguments: c.function.arguments }));
}

// --- the checks -----------------------------------------------------------------------------

async function openaiChecks() {
  const client = new OpenAI({ baseURL, apiKey, fetch: recordingFetch, timeout: REQUEST_TIMEOUT_MS,
    maxRetries: 0 });

  await check('openai: beta.chat.completions.parse with zodResponseFormat', async () => {
    const format = zodResponseFormat(PersonForOpenAI, 'person');
    const r = await client.beta.chat.completions.parse({
      model: modelName, messages: personPrompt, response_format: format,
      max_tokens: MAX_TOKENS, temperature: 0,
    });
    const choice = r.choices[0];
    expect(choice.finish_reason === 'stop', `finish_reason ${choice.finish_reason}`);
    const parsed = choice.message.parsed;
    expect(parsed !== null && typeof parsed === 'object', `parsed is ${JSON.stringify(parsed)}`);
    const sent = lastChatBody().response_format;
    expect(sent?.type === 'json_schema', `response_format sent: ${JSON.stringify(sent)}`);
    expect(JSON.stringify(sent.json_schema.schema) === JSON.stringify(format.json_schema.schema),
      'the schema sent is not zodResponseFormat\'s');
    validateWithAjv(sent.json_schema.schema, parsed, 'parsed');
    validateWithAjv(sent.json_schema.schema, JSON.parse(choice.message.content), 'content');
    validateWithZod(PersonForOpenAI, parsed, 'parsed');
    return parsed;
  });

  // One call at most: the grammar must then end the reply after it, whatever the model.
  await check('openai: tools, tool_choice required, parallel_tool_calls false', async () => {
    const r = await client.chat.completions.create({
      model: modelName, messages: toolPrompt, tools: OPENAI_TOOLS, tool_choice: 'required',
      parallel_tool_calls: false, max_tokens: MAX_TOKENS, temperature: 0,
    });
    const choice = r.choices[0];
    expect(choice.finish_reason === 'tool_calls', `finish_reason ${choice.finish_reason}`);
    expect(!choice.message.content, `content ${JSON.stringify(choice.message.content)}`);
    const calls = checkToolCalls(choice.message.tool_calls, OPENAI_TOOLS, 'message');
    expect(calls.length === 1, `${calls.length} calls with parallel_tool_calls false`);
    return calls;
  });

  await check('openai: tools, a named tool_choice, sampled', async () => {
    const r = await client.chat.completions.create({
      model: modelName, messages: toolPrompt, tools: OPENAI_TOOLS,
      tool_choice: { type: 'function', function: { name: 'add' } }, parallel_tool_calls: false,
      max_tokens: MAX_TOKENS, temperature: 0.7, seed: 11,
    });
    const choice = r.choices[0];
    expect(choice.finish_reason === 'tool_calls', `finish_reason ${choice.finish_reason}`);
    const calls = checkToolCalls(choice.message.tool_calls, OPENAI_TOOLS, 'message');
    expect(calls.length === 1 && calls[0].name === 'add', `calls ${JSON.stringify(calls)}`);
    return calls;
  });

  // Parallel calls allowed: the random model may call again and again until max_tokens, so the
  // reply ends with "tool_calls" or "length"; either way every call returned is whole and valid
  // (a call cut by max_tokens is returned as content, never as a call).
  const parallelRequest = {
    model: modelName, messages: toolPrompt, tools: OPENAI_TOOLS, tool_choice: 'required',
    max_tokens: MAX_TOKENS, temperature: 0,
  };
  let unstreamed;
  await check('openai: tools, tool_choice required, parallel calls', async () => {
    const r = await client.chat.completions.create(parallelRequest);
    const choice = r.choices[0];
    expect(['tool_calls', 'length'].includes(choice.finish_reason),
      `finish_reason ${choice.finish_reason}`);
    const calls = checkToolCalls(choice.message.tool_calls, OPENAI_TOOLS, 'message');
    if (choice.finish_reason === 'tool_calls') {
      expect(!choice.message.content, `content ${JSON.stringify(choice.message.content)}`);
    }
    unstreamed = { finish: choice.finish_reason, calls, content: choice.message.content ?? '' };
    return { finish_reason: choice.finish_reason, calls: calls.length };
  });

  await check('openai: streamed tool calls, accumulated by index', async () => {
    const stream = await client.chat.completions.create({ ...parallelRequest, stream: true,
      stream_options: { include_usage: true } });
    const calls = [];
    let finishReason = null;
    let content = '';
    let chunks = 0;
    let usage = null;
    for await (const chunk of stream) {
      ++chunks;
      if (chunk.usage) usage = chunk.usage;
      for (const choice of chunk.choices) {
        content += choice.delta?.content ?? '';
        for (const delta of choice.delta?.tool_calls ?? []) {
          expect(Number.isInteger(delta.index), `a tool_calls delta without index: ${JSON.stringify(delta)}`);
          const call = (calls[delta.index] ??= { id: '', type: 'function', function: { name: '', arguments: '' } });
          if (delta.id) call.id += delta.id;
          if (delta.type) call.type = delta.type;
          if (delta.function?.name) call.function.name += delta.function.name;
          if (delta.function?.arguments) call.function.arguments += delta.function.arguments;
        }
        if (choice.finish_reason) finishReason = choice.finish_reason;
      }
    }
    expect(['tool_calls', 'length'].includes(finishReason), `finish_reason ${finishReason}`);
    expect(calls.every((c) => c !== undefined), 'the call indexes have a gap');
    expect(usage !== null && usage.completion_tokens > 0, `usage ${JSON.stringify(usage)}`);
    const streamed = checkToolCalls(calls, OPENAI_TOOLS, 'streamed');
    // Greedy: the stream carries the same reply as the unstreamed request.
    if (unstreamed !== undefined) {
      const same = { finish: finishReason, calls: streamed, content };
      expect(JSON.stringify(same) === JSON.stringify(unstreamed),
        `streamed ${JSON.stringify(same)} != unstreamed ${JSON.stringify(unstreamed)}`);
    }
    return { chunks, finish_reason: finishReason, calls: streamed.length };
  });

  await check('openai: beta.chat.completions.runTools agent loop', async () => {
    if (typeof client.beta?.chat?.completions?.runTools !== 'function') {
      return { skip: `openai ${mods.versions.openai} has no beta.chat.completions.runTools` };
    }
    const invalid = [];
    const invoked = [];
    const implementations = {
      get_weather: () => ({ temperature: 21, unit: 'celsius', sky: 'clear' }),
      add: ({ a, b }) => ({ sum: a + b }),
    };
    // parse: the runner's hook for the arguments text; a malformed call is recorded and fails
    // the check (the runner itself would only report it to the model).
    const runnable = OPENAI_TOOLS.map(({ function: f }) => ({
      type: 'function',
      function: {
        name: f.name, description: f.description, parameters: f.parameters,
        parse: (text) => {
          try {
            const args = JSON.parse(text);
            validateWithAjv(f.parameters, args, `${f.name} arguments`);
            return args;
          } catch (err) {
            invalid.push(String(err.message ?? err));
            throw err;
          }
        },
        function: (args) => {
          invoked.push({ name: f.name, args });
          return implementations[f.name](args);
        },
      },
    }));
    // tool_choice required: every round calls (one function: parallel_tool_calls false), so the
    // loop ends at maxChatCompletions. (Under "auto" the random model writes text until max_tokens,
    // and the runner throws on any reply that ends by length.)
    const runner = client.beta.chat.completions.runTools({
      model: modelName, messages: toolPrompt, tools: runnable, tool_choice: 'required',
      parallel_tool_calls: false, max_tokens: MAX_TOKENS, temperature: 0,
    }, { maxChatCompletions: 3 });
    let errorEvent = null;
    runner.on('error', (err) => { errorEvent = err; });
    await runner.done();
    expect(errorEvent === null, `the runner reported ${errorEvent}`);
    expect(invalid.length === 0, `malformed calls: ${invalid.join('; ')}`);
    const completions = runner.allChatCompletions();
    expect(completions.length >= 1 && completions.length <= 3, `${completions.length} completions`);
    // Each round after the first sent the previous calls back with their results.
    const bodies = requestBodies('/chat/completions');
    for (const body of bodies.slice(1)) {
      expect(body.messages.some((m) => m.role === 'tool'), 'a later round carries no tool result');
    }
    const last = completions[completions.length - 1].choices[0];
    return { rounds: completions.length, invoked, lastFinishReason: last.finish_reason };
  });
}

async function vercelChecks() {
  const provider = createOpenAICompatible({ name: 'trellis', baseURL, apiKey, fetch: recordingFetch });
  // The provider sends response_format json_schema only to a model said to support structured
  // outputs; otherwise it sends json_object (and drops the schema).
  const model = provider(modelName, {}, { supportsStructuredOutputs: true });

  await check('ai: generateObject (mode json, supportsStructuredOutputs)', async () => {
    const { object, finishReason } = await generateObject({
      model, schema: Person, schemaName: 'person', mode: 'json', prompt: personPrompt[0].content,
      maxTokens: MAX_TOKENS, temperature: 0, maxRetries: 0,
    });
    expect(finishReason === 'stop', `finishReason ${finishReason}`);
    const sent = lastChatBody().response_format;
    expect(sent?.type === 'json_schema', `response_format sent: ${JSON.stringify(sent)}`);
    expect(!sent.json_schema.schema.required.includes('tags'), 'tags is required in the schema sent');
    validateWithAjv(sent.json_schema.schema, object, 'object');
    validateWithZod(Person, object, 'object');
    return object;
  });

  // The model's arguments, as each execute received them.
  const runTools = async (toolChoice, providerOptions) => {
    const received = [];
    const result = await generateText({
      providerOptions,
      model,
      system: toolPrompt[0].content,
      prompt: toolPrompt[1].content,
      tools: {
        get_weather: aiTool({
          description: 'The weather in a city',
          parameters: WeatherArgs,
          execute: async (args) => {
            received.push(args);
            return { temperature: 21, unit: args.unit, sky: 'clear' };
          },
        }),
      },
      toolChoice, maxSteps: 3, maxTokens: MAX_TOKENS, temperature: 0, maxRetries: 0,
    });
    const sentTools = lastChatBody().tools;
    expect(Array.isArray(sentTools) && sentTools.length === 1, `tools sent: ${JSON.stringify(sentTools)}`);
    for (const args of received) {
      validateWithAjv(sentTools[0].function.parameters, args, 'get_weather arguments');
      validateWithZod(WeatherArgs, args, 'get_weather arguments');
    }
    // Every later step sent the earlier calls back with their results.
    const bodies = requestBodies('/chat/completions');
    expect(bodies.length === result.steps.length, `${bodies.length} requests, ${result.steps.length} steps`);
    for (const body of bodies.slice(1)) {
      expect(body.messages.some((m) => m.role === 'tool'), 'a later step carries no tool result');
    }
    return { received, result, steps: result.steps.map((s) => s.finishReason) };
  };

  await check('ai: generateText with a tool, toolChoice required, maxSteps 3', async () => {
    // The provider passes its providerOptions through as request fields: one call per step, so
    // that each step ends with its call, whatever the model.
    const { received, result, steps } = await runTools('required',
      { trellis: { parallel_tool_calls: false } });
    expect(lastChatBody().parallel_tool_calls === false, 'parallel_tool_calls was not sent');
    expect(received.length === result.steps.length, `${received.length} calls in ${steps.length} steps`);
    for (const step of result.steps) {
      expect(step.finishReason === 'tool-calls', `a step ended with ${step.finishReason}`);
    }
    return { calls: received, steps };
  });

  await check('ai: generateText with a tool, toolChoice auto, maxSteps 3', async () => {
    const { received, result, steps } = await runTools('auto');
    return { calls: received, steps, text: result.text };
  });
}

async function langchainChecks() {
  const chat = new ChatOpenAI({
    model: modelName, apiKey, temperature: 0, maxTokens: MAX_TOKENS, maxRetries: 0,
    timeout: REQUEST_TIMEOUT_MS, configuration: { baseURL, fetch: recordingFetch },
  });

  for (const method of [undefined, 'jsonSchema', 'functionCalling']) {
    const label = method === undefined ? 'the default method' : `method ${method}`;
    // The json_schema methods go through openai's zodResponseFormat, which refuses an optional
    // property (strict mode has none): those get the nullable form.
    const schemaOf = method === 'functionCalling' ? Person : PersonForOpenAI;
    await check(`langchain: withStructuredOutput (${label})`, async () => {
      const structured = chat.withStructuredOutput(schemaOf,
        method === undefined ? { name: 'person' } : { name: 'person', method });
      const object = await structured.invoke(personPrompt[0].content);
      const body = lastChatBody();
      let schema;
      if (body.response_format !== undefined) {
        expect(body.response_format.type === 'json_schema',
          `response_format sent: ${JSON.stringify(body.response_format)}`);
        schema = body.response_format.json_schema.schema;
      } else {
        expect(Array.isArray(body.tools) && body.tools.length === 1, `tools sent: ${JSON.stringify(body.tools)}`);
        expect(body.tool_choice?.function?.name === 'person',
          `tool_choice sent: ${JSON.stringify(body.tool_choice)}`);
        schema = body.tools[0].function.parameters;
      }
      validateWithAjv(schema, object, 'result');
      validateWithZod(schemaOf, object, 'result');
      return { sent: body.response_format ? 'response_format json_schema' : 'a forced tool', object };
    });
  }

  const weather = lcTool(async (args) => JSON.stringify({ temperature: 21, unit: args.unit }), {
    name: 'get_weather', description: 'The weather in a city', schema: WeatherArgs,
  });
  const checkLangchainCalls = (calls, what) => {
    const sentTools = lastChatBody().tools;
    expect(Array.isArray(calls) && calls.length > 0, `${what}: no tool_calls`);
    for (const [i, call] of calls.entries()) {
      expect(call.name === 'get_weather', `${what}: call ${i} names ${call.name}`);
      validateWithAjv(sentTools[0].function.parameters, call.args, `${what}: call ${i} args`);
      validateWithZod(WeatherArgs, call.args, `${what}: call ${i} args`);
    }
    return calls.map((c) => ({ name: c.name, args: c.args }));
  };

  await check('langchain: bindTools with tool_choice required', async () => {
    const message = await chat.bindTools([weather], { tool_choice: 'required' }).invoke(toolPrompt);
    expect((message.invalid_tool_calls ?? []).length === 0,
      `invalid_tool_calls ${JSON.stringify(message.invalid_tool_calls)}`);
    expect(lastChatBody().tool_choice === 'required',
      `tool_choice sent: ${JSON.stringify(lastChatBody().tool_choice)}`);
    return checkLangchainCalls(message.tool_calls, 'AIMessage');
  });

  await check('langchain: bindTools streamed (tool_call_chunks concatenated)', async () => {
    const stream = await chat.bindTools([weather], { tool_choice: 'required' }).stream(toolPrompt);
    let whole;
    for await (const chunk of stream) whole = whole === undefined ? chunk : whole.concat(chunk);
    expect(whole !== undefined, 'no chunks');
    expect((whole.invalid_tool_calls ?? []).length === 0,
      `invalid_tool_calls ${JSON.stringify(whole.invalid_tool_calls)}`);
    expect(lastChatBody().stream === true, 'the request was not streamed');
    return checkLangchainCalls(whole.tool_calls, 'AIMessageChunk');
  });
}

if (!baseURL || !modelName) setupError('usage: structured_clients_check.mjs BASE_URL MODEL [API_KEY]');
console.log(`packages: ${JSON.stringify(mods.versions)}`);
await openaiChecks();
await vercelChecks();
await langchainChecks();
const failed = results.filter((r) => r.ok === false).map((r) => r.name);
const summary = {
  ok: failed.length === 0,
  passed: results.filter((r) => r.ok).length,
  failed,
  skipped: results.filter((r) => r.skipped).map((r) => r.name),
};
console.log(JSON.stringify(summary));
clearTimeout(watchdog);
process.exit(summary.ok ? 0 : 1);
