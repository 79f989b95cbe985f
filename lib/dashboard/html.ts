/**
 * HTML built by tagged templates (docs/design.md §30): every interpolated value is escaped
 * unless it is already {@link Html}, so a page can only contain markup its view wrote.
 */
export class Html {
  constructor(readonly text: string) {}
  toString(): string {
    return this.text;
  }
}

/** A value a template accepts: text is escaped, `Html` kept, lists joined, nothing for null/false. */
export type HtmlValue = Html | string | number | bigint | boolean | null | undefined | HtmlValue[];

const ESCAPES: Readonly<Record<string, string>> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
};

/** Escapes text for HTML content and quoted attribute values. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ESCAPES[c] ?? c);
}

function render(value: HtmlValue): string {
  if (value instanceof Html) return value.text;
  if (Array.isArray(value)) return value.map(render).join('');
  if (value === null || value === undefined || value === false) return '';
  return escapeHtml(String(value));
}

/** `html\`<p>${text}</p>\``: the literal parts as written, every value escaped. */
export function html(strings: TemplateStringsArray, ...values: HtmlValue[]): Html {
  let out = strings[0] ?? '';
  for (let i = 0; i < values.length; i++) out += render(values[i]) + (strings[i + 1] ?? '');
  return new Html(out);
}

/** A URL's query text from fields, skipping empty ones (repeated keys for lists). */
export function queryString(
  fields: Readonly<Record<string, string | readonly string[] | undefined>>,
): string {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(fields)) {
    if (value === undefined) continue;
    for (const v of typeof value === 'string' ? [value] : value) {
      if (v !== '') params.append(key, v);
    }
  }
  const text = params.toString();
  return text === '' ? '' : `?${text}`;
}
