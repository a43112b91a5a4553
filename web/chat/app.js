// The chat page: conversations kept in localStorage, replies streamed from
// /v1/chat/completions, per-reply figures (prompt tokens, how many the prefix cache served, time
// to the first token, tokens per second) and a panel of the server's /metrics. Untrusted text
// (replies, pasted or typed messages) only ever reaches the page as text nodes: user messages
// through textContent, replies through markdown.js, which builds nodes and never parses HTML.

import { ApiError, listModels, streamChat } from './api.js';
import { renderMarkdown } from './markdown.js';
import { fetchMetrics } from './metrics.js';
import * as store from './store.js';

const METRICS_INTERVAL_MS = 2000;
const RETRY_INTERVAL_MS = 1000;
const MIN_DECODE_SPAN_MS = 100;  // the shortest stream a decode speed is measured over

const $ = (id) => document.getElementById(id);
const ui = {
  sidebar: $('sidebar'),
  toggleSidebar: $('toggle-sidebar'),
  modelName: $('model-name'),
  serverStatus: $('server-status'),
  newChat: $('new-chat'),
  conversationList: $('conversation-list'),
  systemPrompt: $('system-prompt'),
  temperature: $('temperature'),
  topP: $('top-p'),
  maxTokens: $('max-tokens'),
  seed: $('seed'),
  changeKey: $('change-key'),
  kvBar: $('kv-bar'),
  metricsPanel: $('metrics-panel'),
  metricsStatus: $('metrics-status'),
  messages: $('messages'),
  emptyHint: $('empty-hint'),
  error: $('error'),
  composer: $('composer'),
  input: $('composer-input'),
  send: $('send'),
  stop: $('stop'),
  regenerate: $('regenerate'),
  keyDialog: $('key-dialog'),
  keyForm: $('key-form'),
  keyMessage: $('key-message'),
  keyInput: $('key-input'),
  keyCancel: $('key-cancel'),
};

const state = {
  conversations: store.loadConversations(),
  currentId: store.loadCurrentId(),
  settings: store.loadSettings(),
  apiKey: store.loadApiKey(),
  model: '',
  connected: false,
  generation: null,  // {conversationId, controller} while a reply streams
  afterKey: null,    // what to run once a key is accepted (say, the reply that got a 401)
};

// ---- conversations ---------------------------------------------------------------------------

function current() {
  let conversation = state.conversations.find((c) => c.id === state.currentId);
  if (!conversation) {
    conversation = state.conversations[0];
    if (!conversation) {
      conversation = store.newConversation();
      state.conversations.unshift(conversation);
    }
    state.currentId = conversation.id;
    store.saveCurrentId(state.currentId);
  }
  return conversation;
}

function persist() {
  if (!store.saveConversations(state.conversations)) {
    showError('The browser refused to save the conversations (storage full?); delete some.');
  }
}

function selectConversation(id) {
  state.currentId = id;
  store.saveCurrentId(id);
  renderAll();
  closeSidebarOnPhone();
}

function startNewConversation() {
  const conversation = current();
  // An empty conversation is reused rather than piling up blank ones.
  if (conversation.messages.length > 0) {
    const fresh = store.newConversation();
    fresh.system = conversation.system;
    state.conversations.unshift(fresh);
    state.currentId = fresh.id;
    store.saveCurrentId(fresh.id);
    persist();
  }
  renderAll();
  closeSidebarOnPhone();
  ui.input.focus();
}

function deleteConversation(id) {
  if (state.generation?.conversationId === id) state.generation.controller.abort();
  state.conversations = state.conversations.filter((c) => c.id !== id);
  if (state.currentId === id) state.currentId = state.conversations[0]?.id ?? null;
  persist();
  renderAll();
}

// ---- rendering -------------------------------------------------------------------------------

function renderConversationList() {
  const items = state.conversations.map((conversation) => {
    const li = document.createElement('li');
    const open = document.createElement('button');
    open.type = 'button';
    open.className = 'conversation';
    open.textContent = store.titleOf(conversation);
    open.dataset.id = conversation.id;
    if (conversation.id === state.currentId) open.setAttribute('aria-current', 'true');
    open.addEventListener('click', () => selectConversation(conversation.id));
    const remove = document.createElement('button');
    remove.type = 'button';
    remove.className = 'delete icon-button';
    remove.textContent = '×';
    remove.setAttribute('aria-label', `Delete conversation: ${store.titleOf(conversation)}`);
    remove.addEventListener('click', () => deleteConversation(conversation.id));
    li.append(open, remove);
    return li;
  });
  ui.conversationList.replaceChildren(...items);
}

function formatStats(stats) {
  const parts = [];
  const add = (name, text) => {
    const span = document.createElement('span');
    span.dataset.stat = name;
    span.textContent = text;
    parts.push(span);
  };
  if (stats.promptTokens != null) add('prompt', `prompt ${stats.promptTokens} tokens`);
  if (stats.cachedTokens != null) add('cached', `${stats.cachedTokens} cached`);
  if (stats.ttftMs != null) add('ttft', `first token ${Math.round(stats.ttftMs)} ms`);
  if (stats.tokensPerSecond != null) add('speed', `${stats.tokensPerSecond.toFixed(1)} tokens/s`);
  if (stats.completionTokens != null) add('completion', `${stats.completionTokens} generated`);
  if (stats.finish) add('finish', stats.finish);
  return parts;
}

function messageElement(message) {
  const article = document.createElement('article');
  article.className = `message ${message.role}`;
  article.dataset.id = message.id;
  const who = document.createElement('h3');
  who.className = 'who';
  who.textContent = message.role === 'user' ? 'You' : 'Assistant';
  const body = document.createElement('div');
  body.className = 'body';
  const stats = document.createElement('p');
  stats.className = 'stats';
  article.append(who, body, stats);
  fillMessage(article, message);
  return article;
}

function fillMessage(article, message) {
  const body = article.querySelector('.body');
  if (message.role === 'user') {
    body.textContent = message.content;  // as typed: never interpreted
  } else {
    body.replaceChildren(renderMarkdown(message.content));
    if (message.streaming && !message.content) {
      const dots = document.createElement('span');
      dots.className = 'typing';
      dots.textContent = 'thinking…';
      body.append(dots);
    }
  }
  article.classList.toggle('streaming', Boolean(message.streaming));
  // Screen readers hear a streaming reply once it is complete, not token by token.
  article.setAttribute('aria-busy', String(Boolean(message.streaming)));
  article.querySelector('.stats').replaceChildren(...formatStats(message.stats ?? {}));
}

function nearBottom() {
  const el = document.scrollingElement;
  const box = ui.messages;
  return box.scrollHeight - box.scrollTop - box.clientHeight < 80 ||
         el.scrollHeight - el.scrollTop - el.clientHeight < 80;
}

function scrollToEnd() {
  ui.messages.scrollTop = ui.messages.scrollHeight;
}

function renderConversation() {
  const conversation = current();
  ui.messages.replaceChildren(...conversation.messages.map(messageElement));
  ui.emptyHint.hidden = conversation.messages.length > 0;
  if (document.activeElement !== ui.systemPrompt) ui.systemPrompt.value = conversation.system ?? '';
  scrollToEnd();
}

// Re-renders one message of the open conversation in place (coalesced to one per frame).
const pendingUpdates = new Map();
function updateMessage(conversation, message) {
  if (conversation.id !== state.currentId) return;
  pendingUpdates.set(message.id, message);
  if (pendingUpdates.size > 1) return;
  requestAnimationFrame(() => {
    const follow = nearBottom();
    for (const m of pendingUpdates.values()) {
      const article = ui.messages.querySelector(`article[data-id="${CSS.escape(m.id)}"]`);
      if (article) fillMessage(article, m);
    }
    pendingUpdates.clear();
    if (follow) scrollToEnd();
  });
}

function renderButtons() {
  const busy = state.generation !== null;
  const conversation = current();
  ui.send.hidden = busy;  // Stop takes its place while a reply streams
  ui.stop.hidden = !busy;
  ui.regenerate.disabled = busy || !conversation.messages.some((m) => m.role === 'user');
}

function renderAll() {
  current();  // there is always an open conversation, even a new empty one
  renderConversationList();
  renderConversation();
  renderButtons();
}

function showError(message) {
  ui.error.textContent = message;
  ui.error.hidden = !message;
}

function setStatus(text, kind) {
  ui.serverStatus.textContent = text;
  ui.serverStatus.dataset.kind = kind;
}

// ---- the server ------------------------------------------------------------------------------

let connectTimer = 0;
async function connect() {
  clearTimeout(connectTimer);
  try {
    const models = await listModels(state.apiKey);
    // A server of several models: the choice stays across reconnections while it is served.
    if (!models.includes(state.model)) state.model = models[0] ?? '';
    state.connected = true;
    showModels(models);
    setStatus('ready', 'ok');
    return true;
  } catch (err) {
    state.connected = false;
    if (err.status === 401) {
      setStatus('API key needed', 'warn');
      askForKey(keyProblem(err));
    } else if (err.status === 503) {
      setStatus('loading the model…', 'warn');
      connectTimer = setTimeout(connect, RETRY_INTERVAL_MS);
    } else {
      setStatus(err.status ? `error: ${err.message}` : 'server unreachable', 'error');
      connectTimer = setTimeout(connect, RETRY_INTERVAL_MS * 3);
    }
    return false;
  }
}

function showModels(models) {
  ui.modelName.replaceChildren(
    ...models.map((id) => {
      const option = document.createElement('option');
      option.value = id;
      option.textContent = id;
      return option;
    }),
  );
  ui.modelName.value = state.model;
  ui.modelName.disabled = models.length < 2;
}

function keyProblem(err) {
  if (!state.apiKey) return 'This server requires an API key. Enter it to chat.';
  return `The server did not accept this API key (${err.message}). Check it and enter it again.`;
}

function askForKey(message) {
  ui.keyMessage.textContent = message;
  ui.keyMessage.classList.toggle('problem', Boolean(state.apiKey));
  ui.keyInput.value = '';
  if (!ui.keyDialog.open) ui.keyDialog.showModal();
  ui.keyInput.focus();
}

async function saveKey(event) {
  event.preventDefault();
  const key = ui.keyInput.value.trim();
  if (!key) return;
  state.apiKey = key;
  store.saveApiKey(key);
  ui.keyDialog.close();
  if (await connect()) {
    const next = state.afterKey;
    state.afterKey = null;
    next?.();
  }
}

// ---- generation ------------------------------------------------------------------------------

function readSettings() {
  const number = (input, fallback) => {
    const value = input.valueAsNumber;
    return Number.isFinite(value) ? value : fallback;
  };
  return {
    temperature: number(ui.temperature, store.DEFAULT_SETTINGS.temperature),
    topP: number(ui.topP, store.DEFAULT_SETTINGS.topP),
    maxTokens: Math.max(1, Math.round(number(ui.maxTokens, store.DEFAULT_SETTINGS.maxTokens))),
    seed: ui.seed.value.trim(),
  };
}

function newMessageId() {
  return `m-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
}

function chatRequest(conversation, upTo) {
  const messages = [];
  if (conversation.system?.trim()) messages.push({ role: 'system', content: conversation.system });
  for (const m of conversation.messages.slice(0, upTo)) {
    if (m.role === 'assistant' && (m.failed || !m.content)) continue;
    messages.push({ role: m.role, content: m.content });
  }
  const s = readSettings();
  const request = { messages, temperature: s.temperature, top_p: s.topP, max_tokens: s.maxTokens };
  if (state.model) request.model = state.model;
  if (s.seed !== '' && Number.isFinite(Number(s.seed))) request.seed = Math.trunc(Number(s.seed));
  return request;
}

async function generate() {
  if (state.generation) return;
  const conversation = current();
  showError('');
  const reply = { id: newMessageId(), role: 'assistant', content: '', streaming: true, stats: {} };
  const request = chatRequest(conversation, conversation.messages.length);
  conversation.messages.push(reply);
  conversation.updated = Date.now();
  const controller = new AbortController();
  state.generation = { conversationId: conversation.id, controller };
  ui.messages.append(messageElement(reply));
  ui.emptyHint.hidden = true;
  scrollToEnd();
  renderButtons();

  const started = performance.now();
  let firstAt = null;
  let pieces = 0;
  let usage = null;
  try {
    const { finishReason } = await streamChat(request, {
      apiKey: state.apiKey,
      signal: controller.signal,
      onDelta(text) {
        if (firstAt === null) {
          firstAt = performance.now();
          reply.stats.ttftMs = firstAt - started;
        }
        pieces++;
        reply.content += text;
        updateMessage(conversation, reply);
      },
      onUsage(u) {
        usage = u;
      },
    });
    reply.stats.finish = finishReason === 'length' ? 'stopped at max tokens' : finishReason;
  } catch (err) {
    if (err.name === 'AbortError') {
      reply.stats.finish = 'stopped';
    } else if (err.status === 401) {
      // Not answered: drop the empty reply, ask for the key, then try again.
      conversation.messages = conversation.messages.filter((m) => m !== reply);
      state.generation = null;
      persist();
      renderAll();
      state.afterKey = () => generate();
      state.connected = false;
      setStatus('API key needed', 'warn');
      askForKey(keyProblem(err));
      return;
    } else {
      reply.failed = true;
      reply.stats.finish = 'failed';
      showError(`The reply failed: ${err.message}`);
    }
  }
  const ended = performance.now();
  if (usage) {
    reply.stats.promptTokens = usage.prompt_tokens;
    reply.stats.cachedTokens = usage.prompt_tokens_details?.cached_tokens ?? 0;
    reply.stats.completionTokens = usage.completion_tokens;
  }
  // Decode speed: the tokens after the first over the time after the first. A reply that
  // arrived in a burst (a fast model, or a network that batches) gives no such span: then the
  // whole request's rate, from sending it to its end.
  const generated = usage?.completion_tokens ?? pieces;
  if (firstAt !== null && generated > 1) {
    reply.stats.tokensPerSecond = ended - firstAt >= MIN_DECODE_SPAN_MS
                                      ? ((generated - 1) * 1000) / (ended - firstAt)
                                      : (generated * 1000) / (ended - started);
  }
  reply.streaming = false;
  state.generation = null;
  persist();
  updateMessage(conversation, reply);
  renderConversationList();
  renderButtons();
  pollMetricsSoon();
}

function sendMessage() {
  const text = ui.input.value;
  if (!text.trim() || state.generation) return;
  const conversation = current();
  conversation.messages.push({ id: newMessageId(), role: 'user', content: text });
  conversation.updated = Date.now();
  ui.input.value = '';
  persist();
  renderAll();
  generate();
}

function regenerate() {
  if (state.generation) return;
  const conversation = current();
  while (conversation.messages.length && conversation.messages.at(-1).role === 'assistant') {
    conversation.messages.pop();
  }
  if (!conversation.messages.length) return;
  persist();
  renderAll();
  generate();
}

function stop() {
  state.generation?.controller.abort();
}

// ---- metrics ---------------------------------------------------------------------------------

let metricsTimer = 0;
function showMetrics(m) {
  const set = (name, text) => {
    ui.metricsPanel.querySelector(`[data-metric="${name}"]`).textContent = text;
  };
  const count = (v) => (v == null ? '–' : String(v));
  const total = m.blocksTotal ?? 0;
  set('used', total ? `${count(m.blocksUsed)} / ${total}` : count(m.blocksUsed));
  set('cached', count(m.blocksCached));
  set('free', count(m.blocksFree));
  set('hit-rate', m.hitRate == null ? '–' : `${(m.hitRate * 100).toFixed(1)} %`);
  set('running', count(m.running));
  set('waiting', count(m.waiting));
  const share = (v) => (total > 0 && v != null ? `${(100 * v) / total}%` : '0%');
  ui.kvBar.querySelector('.kv-used').style.width = share(m.blocksUsed);
  ui.kvBar.querySelector('.kv-cached').style.width = share(m.blocksCached);
  ui.kvBar.setAttribute('aria-label', `KV pool: ${count(m.blocksUsed)} blocks in use, ` +
                        `${count(m.blocksCached)} cached, ${count(m.blocksFree)} free of ${total}`);
}

async function pollMetrics() {
  clearTimeout(metricsTimer);
  if (document.visibilityState !== 'hidden') {
    try {
      showMetrics(await fetchMetrics(state.model));
      ui.metricsStatus.textContent = `updated ${new Date().toLocaleTimeString()}`;
    } catch (err) {
      ui.metricsStatus.textContent = `metrics unavailable (${err.message})`;
    }
  }
  metricsTimer = setTimeout(pollMetrics, METRICS_INTERVAL_MS);
}

function pollMetricsSoon() {
  clearTimeout(metricsTimer);
  metricsTimer = setTimeout(pollMetrics, 100);
}

// ---- settings and layout ---------------------------------------------------------------------

function showSettings() {
  ui.temperature.value = state.settings.temperature;
  ui.topP.value = state.settings.topP;
  ui.maxTokens.value = state.settings.maxTokens;
  ui.seed.value = state.settings.seed;
}

function closeSidebarOnPhone() {
  if (ui.toggleSidebar.getAttribute('aria-expanded') === 'true') toggleSidebar(false);
}

function toggleSidebar(open) {
  ui.toggleSidebar.setAttribute('aria-expanded', String(open));
  ui.sidebar.classList.toggle('open', open);
  if (open) ui.newChat.focus();
}

async function copyCode(button) {
  const code = button.parentElement.querySelector('code')?.textContent ?? '';
  try {
    await navigator.clipboard.writeText(code);
    button.textContent = 'Copied';
  } catch {
    button.textContent = 'Copy failed';
  }
  setTimeout(() => { button.textContent = 'Copy'; }, 1500);
}

function wire() {
  ui.composer.addEventListener('submit', (event) => {
    event.preventDefault();
    sendMessage();
  });
  ui.input.addEventListener('keydown', (event) => {
    if (event.key === 'Enter' && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      sendMessage();
    } else if (event.key === 'Escape' && state.generation) {
      stop();
    }
  });
  ui.stop.addEventListener('click', stop);
  ui.modelName.addEventListener('change', () => {
    state.model = ui.modelName.value;
    pollMetricsSoon();
  });
  ui.regenerate.addEventListener('click', regenerate);
  ui.newChat.addEventListener('click', startNewConversation);
  ui.toggleSidebar.addEventListener('click', () =>
    toggleSidebar(ui.toggleSidebar.getAttribute('aria-expanded') !== 'true'));
  ui.systemPrompt.addEventListener('input', () => {
    const conversation = current();
    conversation.system = ui.systemPrompt.value;
    persist();
  });
  ui.composer.addEventListener('reset', (e) => e.preventDefault());
  document.getElementById('settings').addEventListener('input', (event) => {
    if (event.target === ui.systemPrompt) return;
    state.settings = readSettings();
    store.saveSettings(state.settings);
  });
  document.getElementById('settings').addEventListener('submit', (e) => e.preventDefault());
  ui.changeKey.addEventListener('click', () =>
    askForKey(state.apiKey ? 'Enter a new API key (it replaces the saved one).'
                           : 'Enter the API key for this server (if it needs one).'));
  ui.keyForm.addEventListener('submit', saveKey);
  ui.keyCancel.addEventListener('click', () => {
    state.afterKey = null;
    ui.keyDialog.close();
  });
  ui.messages.addEventListener('click', (event) => {
    const button = event.target.closest('button.copy-code');
    if (button) copyCode(button);
  });
  document.addEventListener('visibilitychange', () => {
    if (document.visibilityState === 'visible') pollMetricsSoon();
  });
  document.addEventListener('keydown', (event) => {
    if (event.key === 'Escape' && ui.sidebar.classList.contains('open')) {
      toggleSidebar(false);
      ui.toggleSidebar.focus();
    }
  });
  // Another tab changed the saved conversations: show them (unless this tab is mid-reply).
  window.addEventListener('storage', (event) => {
    if (event.key?.startsWith('trellis.chat.') && !state.generation) {
      state.conversations = store.loadConversations();
      state.apiKey = store.loadApiKey();
      renderAll();
    }
  });
}

// A reply that was streaming when the page went away stays as far as it got.
for (const conversation of state.conversations) {
  for (const m of conversation.messages) {
    if (m.streaming) {
      m.streaming = false;
      m.stats = { ...(m.stats ?? {}), finish: 'interrupted' };
    }
  }
}

wire();
showSettings();
renderAll();
connect();
pollMetrics();
document.documentElement.dataset.ready = 'true';
