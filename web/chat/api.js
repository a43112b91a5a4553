// The page's client of the server's OpenAI-compatible API: the model list, and chat completions
// streamed as Server-Sent Events (stream: true, with the usage chunk at the end). Errors carry
// the HTTP status and the server's own message, so the page can tell a missing or wrong API key
// (401) from anything else.

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.name = 'ApiError';
    this.status = status;  // 0: no answer (network), else the HTTP status
  }
}

function headers(apiKey, json) {
  const h = {};
  if (json) h['Content-Type'] = 'application/json';
  if (apiKey) h.Authorization = `Bearer ${apiKey}`;
  return h;
}

// The server's message from an error response ({"error": {"message": ...}}), else the status.
async function errorFrom(response) {
  let message = `${response.status} ${response.statusText}`.trim();
  try {
    const body = await response.json();
    if (body?.error?.message) message = body.error.message;
  } catch {
    // not JSON: keep the status line
  }
  return new ApiError(response.status, message);
}

async function send(url, init) {
  let response;
  try {
    response = await fetch(url, init);
  } catch (err) {
    if (err?.name === 'AbortError') throw err;
    throw new ApiError(0, 'cannot reach the server');
  }
  if (!response.ok) throw await errorFrom(response);
  return response;
}

// The ids of the served models that chat (a server of several lists embedding models too).
export async function listModels(apiKey) {
  const response = await send('/v1/models', { headers: headers(apiKey, false) });
  const body = await response.json();
  return (body.data ?? []).filter((m) => !['embedding', 'rerank'].includes(m.kind)).map((m) => m.id);
}

// Splits a growing SSE text into complete events; returns [events' data payloads, the rest].
export function takeSseEvents(buffer) {
  const payloads = [];
  const normalized = buffer.replace(/\r\n?/g, '\n');
  let start = 0;
  for (;;) {
    const end = normalized.indexOf('\n\n', start);
    if (end === -1) break;
    const data = [];
    for (const line of normalized.slice(start, end).split('\n')) {
      if (line.startsWith('data:')) data.push(line.slice(line[5] === ' ' ? 6 : 5));
      // comments (": keep-alive") and other fields are ignored
    }
    if (data.length) payloads.push(data.join('\n'));
    start = end + 2;
  }
  return [payloads, normalized.slice(start)];
}

// Streams one chat completion. `request` is the JSON body without `stream`; `handlers`:
//   onDelta(text)   each piece of the reply as it arrives
//   onUsage(usage)  the usage chunk ({prompt_tokens, completion_tokens, prompt_tokens_details})
// Resolves to {finishReason} when the stream ends; rejects with ApiError (HTTP or in-stream
// error) or the AbortError of `signal` (the user stopped it).
export async function streamChat(request, { apiKey, signal, onDelta, onUsage }) {
  const body = { ...request, stream: true, stream_options: { include_usage: true } };
  const response = await send('/v1/chat/completions', {
    method: 'POST',
    headers: headers(apiKey, true),
    body: JSON.stringify(body),
    signal,
  });
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  let finishReason = null;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    const [payloads, rest] = takeSseEvents(buffer);
    buffer = rest;
    for (const payload of payloads) {
      if (payload.trim() === '[DONE]') return { finishReason };
      let chunk;
      try {
        chunk = JSON.parse(payload);
      } catch {
        throw new ApiError(502, 'the server sent an event that is not JSON');
      }
      if (chunk.error) throw new ApiError(500, chunk.error.message ?? 'the server reported an error');
      for (const choice of chunk.choices ?? []) {
        const text = choice.delta?.content;
        if (text) onDelta?.(text);
        if (choice.finish_reason) finishReason = choice.finish_reason;
      }
      if (chunk.usage) onUsage?.(chunk.usage);
    }
  }
  if (finishReason === null) throw new ApiError(0, 'the stream ended early');
  return { finishReason };
}
