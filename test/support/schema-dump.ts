import type { Pool } from 'pg';

/**
 * A canonical, server-version-independent description of every object in `schema`: types,
 * tables with columns (type, nullability, default, generation), constraints, indexes, triggers
 * and the version comment, then the functions (their full definitions). Diffed against the
 * committed test/schema.sql so any schema change shows up in review. Schema qualifiers are
 * stripped, so the dump of any schema equals the committed one.
 */
export async function dumpSchema(pool: Pool, schema: string): Promise<string> {
  const lines: string[] = [];
  const q = async (text: string) =>
    (await pool.query(text, [schema])).rows as Record<string, unknown>[];

  for (const t of await q(
    `SELECT t.typname, array_to_string(array_agg(e.enumlabel ORDER BY e.enumsortorder), ', ') AS labels
       FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace JOIN pg_enum e ON e.enumtypid = t.oid
      WHERE n.nspname = $1 GROUP BY t.typname ORDER BY t.typname`,
  )) {
    lines.push(`TYPE ${String(t['typname'])} ENUM (${String(t['labels'])})`);
  }
  for (const table of await q(
    `SELECT c.relname, obj_description(c.oid, 'pg_class') AS comment
       FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = $1 AND c.relkind = 'r' ORDER BY c.relname`,
  )) {
    const name = String(table['relname']);
    lines.push(
      '',
      `TABLE ${name}${table['comment'] ? `  -- comment: ${String(table['comment'])}` : ''}`,
    );
    for (const col of (
      await pool.query(
        `SELECT a.attname, format_type(a.atttypid, a.atttypmod) AS type, a.attnotnull, a.attgenerated, a.attidentity,
                pg_get_expr(d.adbin, d.adrelid) AS expr
           FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
           LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
          WHERE n.nspname = $1 AND c.relname = $2 AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum`,
        [schema, name],
      )
    ).rows as Record<string, unknown>[]) {
      const type = String(col['type']).replace(`${schema}.`, '').replace(`"${schema}".`, '');
      let line = `  ${String(col['attname'])} ${type}${col['attnotnull'] ? ' NOT NULL' : ''}`;
      const expr =
        col['expr'] == null
          ? ''
          : String(col['expr']).split(`${schema}.`).join('').split(`"${schema}".`).join('');
      if (col['attidentity']) line += ` IDENTITY(${String(col['attidentity'])})`;
      if (col['attgenerated'] === 's') line += ` GENERATED AS (${expr}) STORED`;
      else if (expr) line += ` DEFAULT ${expr}`;
      lines.push(line);
    }
    for (const con of (
      await pool.query(
        `SELECT con.conname, pg_get_constraintdef(con.oid) AS def
           FROM pg_constraint con JOIN pg_class c ON c.oid = con.conrelid JOIN pg_namespace n ON n.oid = c.relnamespace
          WHERE n.nspname = $1 AND c.relname = $2 ORDER BY con.conname`,
        [schema, name],
      )
    ).rows as Record<string, unknown>[]) {
      lines.push(
        `  CONSTRAINT ${String(con['conname'])} ${String(con['def']).split(`${schema}.`).join('').split(`"${schema}".`).join('')}`,
      );
    }
    for (const idx of (
      await pool.query(
        `SELECT i.relname, pg_get_indexdef(i.oid) AS def
           FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class c ON c.oid = x.indrelid
           JOIN pg_namespace n ON n.oid = c.relnamespace
          WHERE n.nspname = $1 AND c.relname = $2 ORDER BY i.relname`,
        [schema, name],
      )
    ).rows as Record<string, unknown>[]) {
      const def = String(idx['def']).split(`${schema}.`).join('').split(`"${schema}".`).join('');
      lines.push(
        `  INDEX ${def.replace(/^CREATE (UNIQUE )?INDEX \S+ ON /, (_m, u: string | undefined) => (u ? 'UNIQUE ON ' : 'ON '))}  -- ${String(idx['relname'])}`,
      );
    }
  }
  for (const trg of await q(
    `SELECT t.tgname, c.relname, pg_get_triggerdef(t.oid) AS def
       FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = $1 AND NOT t.tgisinternal ORDER BY c.relname, t.tgname`,
  )) {
    lines.push(
      '',
      unqualified(String(trg['def']), schema).replace(/^CREATE (CONSTRAINT )?TRIGGER /, 'TRIGGER '),
    );
  }
  for (const fn of await q(
    `SELECT p.proname, pg_get_functiondef(p.oid) AS def
       FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
      WHERE n.nspname = $1 ORDER BY p.proname, pg_get_function_identity_arguments(p.oid)`,
  )) {
    lines.push(
      '',
      unqualified(String(fn['def']), schema)
        .trim()
        .replace(/^CREATE OR REPLACE FUNCTION /, 'FUNCTION '),
    );
  }
  return `${lines.join('\n').trim()}\n`;
}

/** The text with every `schema.` / `"schema".` qualifier removed. */
function unqualified(text: string, schema: string): string {
  return text.split(`"${schema}".`).join('').split(`${schema}.`).join('');
}
