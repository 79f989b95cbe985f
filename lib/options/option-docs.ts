import type { OptionDeclaration } from './option-declaration';
import { isPlainObject } from './option-declaration';
import { MODULE_OPTION_TABLE, OPTION_TABLE } from './option-table';

/**
 * How the option table reads in the docs: the README's Configuration table rendered from the
 * declarations, and every option path with its declaration (for the check of the defaults the
 * docs quote, test/unit/options-table.spec.ts).
 */

/** A value as the docs write it: `'public'`, `{ interval: 30000, maxReaps: 5 }`, `[…]`. */
export function renderValue(value: unknown): string {
  if (typeof value === 'string') return `'${value}'`;
  if (Array.isArray(value)) return `[${value.map(renderValue).join(', ')}]`;
  if (isPlainObject(value)) {
    const entries = Object.entries(value).map(([k, v]) => `${k}: ${renderValue(v)}`);
    return entries.length === 0 ? '{}' : `{ ${entries.join(', ')} }`;
  }
  return String(value);
}

/** The value an option takes when it is not given (`value` defaults only). */
export function defaultValue(declaration: OptionDeclaration<unknown>, name: string): unknown {
  return declaration.resolve(undefined, name, name);
}

/** The README's Default cell: the rendered default, `required`, or how a computed one is found. */
export function defaultText(declaration: OptionDeclaration<unknown>, name: string): string {
  switch (declaration.default.kind) {
    case 'required':
      return 'required';
    case 'computed':
      return declaration.default.text;
    case 'value':
      return `\`${renderValue(defaultValue(declaration, name))}\``;
    default: {
      const unknownKind: never = declaration.default;
      return unknownKind;
    }
  }
}

/** The README's Meaning cell: the doc line, `{defaults}` replaced by the fields' defaults. */
export function docText(declaration: OptionDeclaration<unknown>, name: string): string {
  if (!declaration.doc.includes('{defaults}')) return declaration.doc;
  const defaults = declaration.resolve({}, name, name);
  return declaration.doc.replace('{defaults}', renderValue(defaults));
}

/** Every option the module accepts at the top level, in README order. */
export const TOP_LEVEL_OPTIONS: readonly (readonly [string, OptionDeclaration<unknown>])[] = [
  ...Object.entries(OPTION_TABLE),
  ...Object.entries(MODULE_OPTION_TABLE),
];

const escapeCell = (cell: string): string => cell.replace(/\|/g, '\\|');

/** The rows of the README's Configuration table: option, default, meaning. */
export function optionsTableRows(): readonly (readonly [string, string, string])[] {
  return TOP_LEVEL_OPTIONS.map(([name, declaration]) => [
    `\`${name}\``,
    escapeCell(defaultText(declaration, name)),
    escapeCell(docText(declaration, name)),
  ]);
}

/** The README's Configuration table as markdown (unpadded; prettier aligns it). */
export function renderOptionsTable(): string {
  const lines = [
    '| Option | Default | Meaning |',
    '| --- | --- | --- |',
    ...optionsTableRows().map((cells) => `| ${cells.join(' | ')} |`),
  ];
  return `${lines.join('\n')}\n`;
}

/** An option at any depth: `gc.retention`, `rateLimits.*.shards`, `flushers[].maxBatch`. */
export interface OptionAtPath {
  readonly path: string;
  /** The last name of the path (`retention`, `shards`, `maxBatch`; `*` for an entry). */
  readonly name: string;
  readonly declaration: OptionDeclaration<unknown>;
}

/** Every option and nested option of the table, parents before their fields. */
export function optionPaths(): readonly OptionAtPath[] {
  const out: OptionAtPath[] = [];
  const walk = (path: string, name: string, declaration: OptionDeclaration<unknown>): void => {
    out.push({ path, name, declaration });
    for (const [field, child] of Object.entries(declaration.fields ?? {})) {
      walk(`${path}.${field}`, field, child);
    }
    const entries = declaration.entries;
    if (entries !== undefined) {
      walk(`${path}${entries.by === 'name' ? '.*' : '[]'}`, '*', entries.declaration);
    }
  };
  for (const [name, declaration] of TOP_LEVEL_OPTIONS) walk(name, name, declaration);
  return out;
}
