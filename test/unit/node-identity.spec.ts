import { hostname } from 'node:os';

import type { GenDurableOptions } from '../../lib';
import { resolveOptions } from '../../lib/options/resolve-options';

/** What resolveOptions checks of a DataSource (a PostgreSQL one, initialized), and no more. */
const dataSource = {
  options: { type: 'postgres' },
  isInitialized: true,
} as unknown as GenDurableOptions['dataSource'];

// docs/design.md §26.2: the node identity defaults to the hostname (or GEN_DURABLE_NODE_ID), never to
// something per-process, so a restarted process on the same host reclaims its predecessor.
describe('nodeId default', () => {
  const saved = process.env['GEN_DURABLE_NODE_ID'];
  afterEach(() => {
    if (saved === undefined) delete process.env['GEN_DURABLE_NODE_ID'];
    else process.env['GEN_DURABLE_NODE_ID'] = saved;
  });

  it('is the hostname, the same for two processes on one host', () => {
    delete process.env['GEN_DURABLE_NODE_ID'];
    expect(resolveOptions({ dataSource }).nodeId).toBe(hostname());
    expect(resolveOptions({ dataSource }).nodeId).not.toContain(String(process.pid));
  });

  it('is GEN_DURABLE_NODE_ID when set, and the option wins over both', () => {
    process.env['GEN_DURABLE_NODE_ID'] = 'pod-7';
    expect(resolveOptions({ dataSource }).nodeId).toBe('pod-7');
    expect(resolveOptions({ dataSource, nodeId: 'explicit' }).nodeId).toBe('explicit');
  });
});
