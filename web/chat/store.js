// The page's saved state in localStorage: the conversations (each with its system prompt and
// messages), which one is open, the sampling settings and the API key. Every read tolerates a
// missing or damaged entry (it falls back to the defaults), and a full storage is reported, never
// thrown at the caller.

const KEYS = {
  conversations: 'trellis.chat.conversations',
  current: 'trellis.chat.current',
  settings: 'trellis.chat.settings',
  apiKey: 'trellis.chat.apiKey',
};

export const DEFAULT_SETTINGS = Object.freeze({
  temperature: 0.7,
  topP: 1,
  maxTokens: 512,
  seed: '',  // empty: a new random seed per request
});

function read(key, fallback) {
  try {
    const text = localStorage.getItem(key);
    return text === null ? fallback : JSON.parse(text);
  } catch {
    return fallback;
  }
}

// False when the browser refused (quota, private mode).
function write(key, value) {
  try {
    localStorage.setItem(key, JSON.stringify(value));
    return true;
  } catch {
    return false;
  }
}

function newId() {
  if (globalThis.crypto?.randomUUID) return crypto.randomUUID();
  return `${Date.now().toString(36)}-${Math.random().toString(36).slice(2)}`;
}

export function newConversation() {
  const now = Date.now();
  return { id: newId(), title: '', system: '', messages: [], created: now, updated: now };
}

function isConversation(c) {
  return c && typeof c.id === 'string' && Array.isArray(c.messages);
}

export function loadConversations() {
  const list = read(KEYS.conversations, []);
  return Array.isArray(list) ? list.filter(isConversation) : [];
}

export function saveConversations(list) {
  return write(KEYS.conversations, list);
}

export function loadCurrentId() {
  const id = read(KEYS.current, null);
  return typeof id === 'string' ? id : null;
}

export function saveCurrentId(id) {
  write(KEYS.current, id);
}

export function loadSettings() {
  const saved = read(KEYS.settings, {});
  return { ...DEFAULT_SETTINGS, ...(saved && typeof saved === 'object' ? saved : {}) };
}

export function saveSettings(settings) {
  write(KEYS.settings, settings);
}

export function loadApiKey() {
  const key = read(KEYS.apiKey, '');
  return typeof key === 'string' ? key : '';
}

export function saveApiKey(key) {
  if (key) write(KEYS.apiKey, key);
  else localStorage.removeItem(KEYS.apiKey);
}

// A conversation's title: its first user message, shortened.
export function titleOf(conversation) {
  if (conversation.title) return conversation.title;
  const first = conversation.messages.find((m) => m.role === 'user');
  if (!first) return 'New chat';
  const line = first.content.replace(/\s+/g, ' ').trim();
  return line.length > 48 ? `${line.slice(0, 47)}…` : line || 'New chat';
}
