// Drives `trellis serve`'s embedding and rerank endpoints with the clients applications use,
// unchanged: the official `openai` npm client (embeddings.create, whose default asks for base64
// and decodes it), LangChain's OpenAIEmbeddings (embedDocuments, embedQuery), and rerank calls in
// the REST shapes of Jina (/v1/rerank) and Cohere (/v2/rerank, documents as objects).
//
//   node tests/node/embedding_clients_check.mjs EMBED_BASE_URL EMBED_MODEL RERANK_BASE_URL RERANK_MODEL
//
// The base URLs are the servers' /v1 roots. Prints `PASS name` / `FAIL name: why` per check, then
// one JSON summary line {"ok", "passed", "failed"}. Exit status: 0 when every check passed, 1 when
// any failed, 2 on a setup error (a package absent).
import { createRequire } from 'node:module';
import path from 'node:path';
import { moduleDirs } from './module_dirs.mjs';

const [embedURL, embedModel, rerankURL, rerankModel] = process.argv.slice(2);
const watchdog = setTimeout(() => {
  console.log(JSON.stringify({ ok: false, error: 'timed out after 100 s' }));
  process.exit(2);
}, 100000);

function loadPackages() {
  for (const dir of moduleDirs()) {
    const require = createRequire(path.join(path.resolve(dir), 'index.js'));
    try {
      return { openai: require('openai'), langchain: require('@langchain/openai') };
    } catch {
      // not in this folder; try the next
    }
  }
  console.log(JSON.stringify({ ok: false, error: 'openai and @langchain/openai are absent ' +
    '(run scripts/setup-node-client.sh build/node)' }));
  clearTimeout(watchdog);
  process.exit(2);
}

const mods = loadPackages();
const OpenAI = mods.openai.OpenAI ?? mods.openai.default ?? mods.openai;
const { OpenAIEmbeddings } = mods.langchain;
const client = new OpenAI({ baseURL: embedURL, apiKey: 'no-key', timeout: 20000, maxRetries: 0 });

const results = [];
async function check(name, body) {
  try {
    const detail = await body();
    results.push({ name, ok: true });
    console.log(`PASS ${name}${detail === undefined ? '' : `: ${JSON.stringify(detail)}`}`);
  } catch (err) {
    results.push({ name, ok: false });
    console.log(`FAIL ${name}: ${String(err?.stack ?? err)}`);
  }
}
function assert(condition, message) {
  if (!condition) throw new Error(message);
}
const norm = (v) => Math.sqrt(v.reduce((s, x) => s + x * x, 0));
const sameVector = (a, b) => a.length === b.length && a.every((x, i) => Math.abs(x - b[i]) < 1e-6);

const TEXTS = ['hello world', 'the cat sat on the mat', 'paris is the capital of france'];
let floats = null;

await check('openai embeddings.create, float', async () => {
  const reply = await client.embeddings.create({ model: embedModel, input: TEXTS,
    encoding_format: 'float' });
  assert(reply.data.length === TEXTS.length, `${reply.data.length} embeddings`);
  floats = reply.data.map((d) => d.embedding);
  for (const v of floats) assert(Math.abs(norm(v) - 1) < 1e-5, `norm ${norm(v)}`);
  assert(reply.usage.prompt_tokens > 0, 'usage.prompt_tokens');
  return { n: floats.length, dims: floats[0].length, usage: reply.usage };
});

await check('openai embeddings.create, its default (base64) decoded', async () => {
  const reply = await client.embeddings.create({ model: embedModel, input: TEXTS });
  reply.data.forEach((d, i) => assert(sameVector(d.embedding, floats[i]), `vector ${i} differs`));
  return { dims: reply.data[0].embedding.length };
});

await check('openai embeddings.create with dimensions', async () => {
  const reply = await client.embeddings.create({ model: embedModel, input: TEXTS[0],
    dimensions: 16, encoding_format: 'float' });
  const v = reply.data[0].embedding;
  assert(v.length === 16, `${v.length} values`);
  assert(Math.abs(norm(v) - 1) < 1e-5, `norm ${norm(v)}`);
});

await check('openai client sees a 400 naming the empty input', async () => {
  try {
    await client.embeddings.create({ model: embedModel, input: ['fine', ''] });
  } catch (err) {
    assert(err.status === 400, `status ${err.status}`);
    assert(err.param === 'input[1]', `param ${err.param}`);
    return { message: err.message };
  }
  throw new Error('no error');
});

await check('LangChain OpenAIEmbeddings embedDocuments and embedQuery', async () => {
  const embeddings = new OpenAIEmbeddings({ model: embedModel, apiKey: 'no-key',
    configuration: { baseURL: embedURL } });
  const docs = await embeddings.embedDocuments(TEXTS);
  docs.forEach((v, i) => assert(sameVector(v, floats[i]), `document ${i} differs`));
  const query = await embeddings.embedQuery(TEXTS[2]);
  assert(sameVector(query, floats[2]), 'the query differs');
  return { n: docs.length };
});

async function postJson(url, body) {
  const response = await fetch(url, { method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify(body) });
  return { status: response.status, json: await response.json() };
}

const QUERY = 'what is the capital of france?';
const DOCS = ['hello world', 'paris is the capital of france', 'the cat sat', 'a little girl'];

await check('rerank, Jina shape (/v1/rerank)', async () => {
  const { status, json } = await postJson(`${rerankURL}/rerank`, { model: rerankModel, query: QUERY,
    documents: DOCS, top_n: 3, return_documents: true });
  assert(status === 200, `HTTP ${status}: ${JSON.stringify(json)}`);
  assert(json.results.length === 3, `${json.results.length} results`);
  for (let i = 0; i < json.results.length; i++) {
    const r = json.results[i];
    assert(r.document.text === DOCS[r.index], `result ${i}: document ${JSON.stringify(r.document)}`);
    if (i > 0) assert(r.relevance_score <= json.results[i - 1].relevance_score, 'not sorted');
  }
  return json.results.map((r) => [r.index, r.relevance_score]);
});

await check('rerank, Cohere shape (/v2/rerank, documents as objects)', async () => {
  const base = rerankURL.replace(/\/v1\/?$/, '');
  const { status, json } = await postJson(`${base}/v2/rerank`, { model: rerankModel, query: QUERY,
    documents: DOCS.map((text) => ({ text })), top_n: 2, return_documents: false });
  assert(status === 200, `HTTP ${status}: ${JSON.stringify(json)}`);
  assert(json.results.length === 2 && json.results[0].document === undefined, JSON.stringify(json));
  return json.results.map((r) => r.index);
});

clearTimeout(watchdog);
const failed = results.filter((r) => !r.ok).map((r) => r.name);
const summary = { ok: failed.length === 0, passed: results.length - failed.length, failed };
console.log(JSON.stringify(summary));
process.exit(summary.ok ? 0 : 1);
