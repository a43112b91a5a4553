// Reads the server's /metrics (Prometheus text format, open without an API key) into the few
// figures the page shows: the KV pool's blocks (held by requests, cached only, free), the prefix
// cache's hit rate, and the requests running and waiting.

const PREFIX = 'trellis:';

// Each sample of a Prometheus text as {name, labels, value}; comments and malformed lines are
// skipped.
export function parsePrometheus(text) {
  const samples = [];
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (!line || line.startsWith('#')) continue;
    const match = /^([A-Za-z_:][\w:]*)(\{(.*)\})?\s+(\S+)/.exec(line);
    if (!match) continue;
    const labels = {};
    for (const pair of (match[3] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) {
      labels[pair[1]] = pair[2].replace(/\\(.)/g, (_, c) => (c === 'n' ? '\n' : c));
    }
    const value = Number(match[4]);
    if (!Number.isNaN(value)) samples.push({ name: match[1], labels, value });
  }
  return samples;
}

// The page's figures from a /metrics text; a figure the server does not expose is null. A server
// of several models labels each model's samples model="NAME": then those of `model` count.
export function summarizeMetrics(text, model) {
  const byName = new Map();
  for (const s of parsePrometheus(text)) {
    const keys = Object.keys(s.labels);
    const ours = keys.length === 0 || (keys.length === 1 && s.labels.model === model);
    if (ours) byName.set(s.name, s.value);
  }
  const get = (name) => byName.get(PREFIX + name) ?? null;
  return {
    blocksTotal: get('kv_blocks_total'),
    blocksUsed: get('kv_blocks_used'),
    blocksCached: get('kv_blocks_cached'),
    blocksFree: get('kv_blocks_free'),
    hitRate: get('prefix_cache_hit_rate'),
    running: get('num_requests_running'),
    waiting: get('num_requests_waiting'),
  };
}

export async function fetchMetrics(model, signal) {
  const response = await fetch('/metrics', { signal, cache: 'no-store' });
  if (!response.ok) throw new Error(`/metrics answered ${response.status}`);
  return summarizeMetrics(await response.text(), model);
}
