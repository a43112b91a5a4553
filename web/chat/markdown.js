// A small Markdown renderer for chat messages that builds DOM nodes and never parses HTML: every
// piece of text ends up in a text node (createTextNode / textContent), so model output or pasted
// text can never inject markup, scripts or event handlers. What it knows: paragraphs (single line
// breaks kept), ATX headings, fenced code blocks (``` or ~~~, an unclosed fence runs to the end,
// which is what a reply still streaming looks like), inline code, bold, italic, ordered and
// unordered lists (nested by indentation), block quotes, rules, and links whose address is
// http(s) (anything else stays text). Everything it does not know is shown as written.
//
//   import { renderMarkdown } from './markdown.js';
//   element.replaceChildren(renderMarkdown(text));

const FENCE = /^ {0,3}(`{3,}|~{3,})\s*([^`\s]*)[^`]*$/;
const HEADING = /^ {0,3}(#{1,6})(?:\s+(.*?))?\s*#*\s*$/;
const RULE = /^ {0,3}([-*_])(?:\s*\1){2,}\s*$/;
const QUOTE = /^ {0,3}> ?(.*)$/;
const LIST_ITEM = /^(\s*)([-*+]|\d{1,9}[.)])\s+(.*)$/;
const ESCAPABLE = '\\`*_{}[]()#+-.!<>~|"\'';

// The address of a Markdown link, when it is an absolute http(s) URL; else null (javascript:,
// data:, relative paths and anything unparsable are refused).
export function safeLinkTarget(raw) {
  let url;
  try {
    url = new URL(raw);
  } catch {
    return null;
  }
  return url.protocol === 'http:' || url.protocol === 'https:' ? url.href : null;
}

function makeLink(doc, href, renderLabel) {
  const a = doc.createElement('a');
  a.href = href;
  a.rel = 'noopener noreferrer nofollow';
  a.target = '_blank';
  renderLabel(a);
  return a;
}

// Appends the inline content of `text` (code spans, emphasis, links) to `parent`.
export function renderInline(text, parent, doc = document) {
  let plain = '';
  const flush = () => {
    if (plain) parent.append(doc.createTextNode(plain));
    plain = '';
  };
  let i = 0;
  while (i < text.length) {
    const c = text[i];
    // A backslash keeps the next punctuation character literal.
    if (c === '\\' && i + 1 < text.length && ESCAPABLE.includes(text[i + 1])) {
      plain += text[i + 1];
      i += 2;
      continue;
    }
    if (c === '`') {
      let n = 1;
      while (text[i + n] === '`') n++;
      const ticks = '`'.repeat(n);
      let close = text.indexOf(ticks, i + n);
      // The closing run must be exactly as long as the opening one.
      while (close !== -1 && text[close + n] === '`') {
        let end = close;
        while (text[end] === '`') end++;
        close = text.indexOf(ticks, end);
      }
      if (close !== -1) {
        flush();
        let content = text.slice(i + n, close);
        if (content.length > 1 && content.startsWith(' ') && content.endsWith(' ') && content.trim()) {
          content = content.slice(1, -1);
        }
        const code = doc.createElement('code');
        code.textContent = content;
        parent.append(code);
        i = close + n;
        continue;
      }
      plain += ticks;
      i += n;
      continue;
    }
    if ((c === '*' || c === '_') && text.startsWith(c.repeat(3), i) && text[i + 3] !== c &&
        !/\s/.test(text[i + 3] ?? ' ')) {
      // ***both***: bold and italic at once.
      const close = text.indexOf(c.repeat(3), i + 4);
      if (close !== -1 && !/\s/.test(text[close - 1])) {
        flush();
        const strong = doc.createElement('strong');
        const em = doc.createElement('em');
        renderInline(text.slice(i + 3, close), em, doc);
        strong.append(em);
        parent.append(strong);
        i = close + 3;
        continue;
      }
    }
    if (c === '*' || c === '_') {
      const before = i > 0 ? text[i - 1] : ' ';
      // Underscores inside words (snake_case) are never emphasis.
      const opens = c === '*' || !/[\p{L}\p{N}]/u.test(before);
      const double = text[i + 1] === c;
      const marker = double ? c + c : c;
      const start = i + marker.length;
      if (opens && start < text.length && !/\s/.test(text[start])) {
        let close = text.indexOf(marker, start + 1);
        while (close !== -1) {
          const inner = text.slice(start, close);
          const after = text[close + marker.length] ?? ' ';
          const closes =
            !/\s/.test(text[close - 1]) &&
            (c === '*' || !/[\p{L}\p{N}]/u.test(after)) &&
            (double || text[close + 1] !== c || inner.includes(c + c));
          if (closes) break;
          close = text.indexOf(marker, close + 1);
        }
        if (close !== -1) {
          flush();
          const element = doc.createElement(double ? 'strong' : 'em');
          renderInline(text.slice(start, close), element, doc);
          parent.append(element);
          i = close + marker.length;
          continue;
        }
      }
      plain += marker;
      i += marker.length;
      continue;
    }
    if (c === '[') {
      const match = /^\[([^\]\n]*)\]\(\s*<?([^\s()<>]+)>?(?:\s+"[^"\n]*")?\s*\)/.exec(text.slice(i));
      if (match) {
        const href = safeLinkTarget(match[2]);
        if (href) {
          flush();
          const label = match[1] || match[2];
          parent.append(makeLink(doc, href, (a) => renderInline(label, a, doc)));
        } else {
          plain += match[0];  // not http(s): shown as written, never as a link
        }
        i += match[0].length;
        continue;
      }
    }
    if ((c === 'h' || c === 'H') && !/[\p{L}\p{N}]/u.test(i > 0 ? text[i - 1] : ' ')) {
      const match = /^https?:\/\/[^\s<>"`]+/i.exec(text.slice(i));
      if (match) {
        // Trailing punctuation belongs to the sentence, not the address.
        let raw = match[0].replace(/[.,;:!?'*_]+$/, '');
        if (raw.endsWith(')') && !raw.includes('(')) raw = raw.slice(0, -1);
        const href = safeLinkTarget(raw);
        if (href) {
          flush();
          parent.append(makeLink(doc, href, (a) => { a.textContent = raw; }));
          i += raw.length;
          continue;
        }
      }
    }
    plain += c;
    i++;
  }
  flush();
}

function codeBlock(doc, language, lines) {
  const figure = doc.createElement('div');
  figure.className = 'code-block';
  const pre = doc.createElement('pre');
  const code = doc.createElement('code');
  if (language) {
    code.className = 'language-' + language.replace(/[^\w+#.-]/g, '');
    code.dataset.language = language;
  }
  code.textContent = lines.join('\n');
  pre.append(code);
  const copy = doc.createElement('button');
  copy.type = 'button';
  copy.className = 'copy-code';
  copy.textContent = 'Copy';
  copy.setAttribute('aria-label', language ? `Copy ${language} code` : 'Copy code');
  figure.append(copy, pre);
  return figure;
}

function indentOf(line) {
  const match = /^\s*/.exec(line);
  return match[0].replace(/\t/g, '    ').length;
}

// Parses the lines of one list starting at `start` (an item line); returns the list element and
// the index of the first line after it.
function parseList(doc, lines, start) {
  const first = LIST_ITEM.exec(lines[start]);
  const baseIndent = indentOf(first[1]);
  const ordered = /\d/.test(first[2]);
  const list = doc.createElement(ordered ? 'ol' : 'ul');
  if (ordered) {
    const number = parseInt(first[2], 10);
    if (number !== 1) list.start = number;
  }
  let i = start;
  while (i < lines.length) {
    const item = LIST_ITEM.exec(lines[i]);
    if (!item || indentOf(item[1]) !== baseIndent || /\d/.test(item[2]) !== ordered) break;
    // The item's own lines: its first, then continuation lines (indented deeper, or lazy lines
    // of the same paragraph), with nested lists among them.
    const li = doc.createElement('li');
    const body = [item[3]];
    i++;
    while (i < lines.length) {
      const line = lines[i];
      if (line.trim() === '') {
        // A blank line ends the item unless the next line is indented under it.
        if (i + 1 < lines.length && lines[i + 1].trim() !== '' && indentOf(lines[i + 1]) > baseIndent) {
          body.push('');
          i++;
          continue;
        }
        break;
      }
      const nested = LIST_ITEM.exec(line);
      if (nested && indentOf(nested[1]) <= baseIndent) break;
      if (!nested && indentOf(line) <= baseIndent && (FENCE.test(line) || HEADING.test(line))) break;
      body.push(line.slice(Math.min(indentOf(line), baseIndent + 2)));
      i++;
    }
    const blocks = renderBlocks(doc, body);
    // The item's first paragraph is shown inline (a "tight" list), nested lists below it.
    if (blocks.firstChild?.nodeName === 'P') blocks.firstChild.replaceWith(...blocks.firstChild.childNodes);
    li.append(blocks);
    list.append(li);
    if (i < lines.length && lines[i].trim() === '' && i + 1 < lines.length &&
        LIST_ITEM.test(lines[i + 1]) && indentOf(LIST_ITEM.exec(lines[i + 1])[1]) === baseIndent) {
      i++;  // a blank line between items of the same list
    }
  }
  return { list, next: i };
}

function paragraph(doc, lines) {
  const p = doc.createElement('p');
  lines.forEach((line, index) => {
    if (index > 0) p.append(doc.createElement('br'));
    renderInline(line.trim(), p, doc);
  });
  return p;
}

function startsBlock(line) {
  return FENCE.test(line) || HEADING.test(line) || RULE.test(line) || QUOTE.test(line) ||
         LIST_ITEM.test(line);
}

function renderBlocks(doc, lines) {
  const fragment = doc.createDocumentFragment();
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    if (line.trim() === '') {
      i++;
      continue;
    }
    const fence = FENCE.exec(line);
    if (fence) {
      const marker = fence[1];
      const body = [];
      i++;
      while (i < lines.length) {
        const close = lines[i].trim();
        if (close.startsWith(marker[0].repeat(marker.length)) && /^(`+|~+)$/.test(close) &&
            close[0] === marker[0]) {
          i++;
          break;
        }
        body.push(lines[i]);
        i++;
      }
      fragment.append(codeBlock(doc, fence[2], body));
      continue;
    }
    const heading = HEADING.exec(line);
    if (heading) {
      // Message headings sit below the page's own (h1) and its sections (h2).
      const level = Math.min(heading[1].length + 2, 6);
      const h = doc.createElement('h' + level);
      h.className = 'md-h' + heading[1].length;
      renderInline(heading[2] ?? '', h, doc);
      fragment.append(h);
      i++;
      continue;
    }
    if (RULE.test(line)) {
      fragment.append(doc.createElement('hr'));
      i++;
      continue;
    }
    if (QUOTE.test(line)) {
      const body = [];
      while (i < lines.length && QUOTE.test(lines[i])) {
        body.push(QUOTE.exec(lines[i])[1]);
        i++;
      }
      const quote = doc.createElement('blockquote');
      quote.append(renderBlocks(doc, body));
      fragment.append(quote);
      continue;
    }
    if (LIST_ITEM.test(line)) {
      const { list, next } = parseList(doc, lines, i);
      fragment.append(list);
      i = next;
      continue;
    }
    const body = [line];
    i++;
    while (i < lines.length && lines[i].trim() !== '' && !startsBlock(lines[i])) {
      body.push(lines[i]);
      i++;
    }
    fragment.append(paragraph(doc, body));
  }
  return fragment;
}

// The Markdown `text` as a DocumentFragment of safe nodes (no HTML is ever parsed).
export function renderMarkdown(text, doc = document) {
  return renderBlocks(doc, String(text ?? '').replace(/\r\n?/g, '\n').split('\n'));
}
