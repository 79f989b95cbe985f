// One node of the multi-process tests (docs/design.md §19): a real Nest application in its own process,
// forked by cluster.ts with test/support/ts-register.cjs. Its role decides `queues`, `reaper`
// and `gc`; the parent drives it over IPC and hears back every step start (with this process's
// clock, which on one machine is the parent's clock too) and the maintenance events.
import 'reflect-metadata';

import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { DataSource } from 'typeorm';

import {
  awaitSignal,
  done,
  DurableFsm,
  EngineService,
  GenDurableModule,
  type GenDurableOptions,
  multiHostClient,
  Step,
  type StepContext,
} from '../../../lib';
import type { NodeCommand, NodeConfig, NodeMessage } from './node-protocol';

const config = JSON.parse(process.env['GD_NODE_CONFIG'] ?? 'null') as NodeConfig | null;
if (!config) throw new Error('node-main: GD_NODE_CONFIG is not set');
const nodeConfig: NodeConfig = config;

function report(message: NodeMessage): void {
  process.send?.(message);
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

interface FlowState {
  sleepMs: number;
  tag: string;
}

/** Inserted by the web node, run by the workers: start → park on 'go' → finish → done. */
@DurableFsm({ name: 'dist_flow', queue: 'dist' })
class DistFlow {
  @Step() async start(ctx: StepContext<FlowState>) {
    report({
      type: 'step',
      id: ctx.id,
      step: 'start',
      attempt: ctx.attempt,
      at: Date.now(),
      node: nodeConfig.nodeId,
    });
    if (ctx.state.sleepMs > 0) await sleep(ctx.state.sleepMs);
    return awaitSignal('go', 'finish', ctx.state);
  }

  @Step() finish(ctx: StepContext<FlowState>) {
    report({
      type: 'step',
      id: ctx.id,
      step: 'finish',
      attempt: ctx.attempt,
      at: Date.now(),
      node: nodeConfig.nodeId,
    });
    return done({ node: nodeConfig.nodeId, tag: ctx.state.tag });
  }
}

function roleOptions(): Partial<GenDurableOptions> {
  switch (nodeConfig.role) {
    case 'web':
      return { queues: {}, reaper: false, gc: false };
    case 'worker':
      return { queues: { dist: nodeConfig.concurrency }, reaper: false, gc: false };
    case 'maintenance':
      return {
        queues: {},
        reaper: { interval: 250 },
        gc: { interval: 1_000, retention: 3_600_000 },
      };
  }
}

async function main(): Promise<void> {
  const dataSource = new DataSource({
    type: 'postgres',
    url: nodeConfig.databaseUrl,
    poolSize: 6,
    ...(nodeConfig.hosts
      ? { extra: { Client: multiHostClient({ hosts: nodeConfig.hosts }) } }
      : {}),
  });
  await dataSource.initialize();

  @Module({
    imports: [
      GenDurableModule.forRoot({
        dataSource,
        nodeId: nodeConfig.nodeId,
        poke: nodeConfig.poke,
        leaseTtl: 2_000,
        heartbeatInterval: 500,
        pollInterval: nodeConfig.pollInterval,
        maxPollInterval: nodeConfig.maxPollInterval,
        drainTimeout: 1_000,
        ...roleOptions(),
      }),
    ],
    providers: [DistFlow],
  })
  class NodeModule {}

  const app = await NestFactory.createApplicationContext(NodeModule, { logger: ['error', 'warn'] });
  const engine = app.get(EngineService);
  engine.events$.subscribe((e) => {
    if (
      e.event === 'reaper:reaped' ||
      e.event === 'boot:warning' ||
      e.event === 'flush:error' ||
      e.event === 'executor:crash'
    ) {
      report({ type: 'event', event: e.event, measurements: { ...e.measurements }, at: e.at });
    }
  });

  const handle = async (command: NodeCommand): Promise<unknown> => {
    switch (command.cmd) {
      case 'insert': {
        const inserted: Array<{ id: string; t0: number; t1: number }> = [];
        for (let i = 0; i < command.count; i++) {
          if (i > 0 && command.spacingMs > 0) await sleep(command.spacingMs);
          const t0 = Date.now();
          const id = await engine.insert('dist_flow', {
            state: { sleepMs: command.sleepMs, tag: command.tag },
          });
          inserted.push({ id, t0, t1: Date.now() });
        }
        return inserted;
      }
      case 'insertAll':
        return engine.insertAll(
          'dist_flow',
          Array.from({ length: command.count }, () => ({
            state: { sleepMs: command.sleepMs, tag: command.tag },
          })),
        );
      case 'signal': {
        const sent: Array<{ id: string; t0: number }> = [];
        for (const [i, id] of command.ids.entries()) {
          if (i > 0 && command.spacingMs > 0) await sleep(command.spacingMs);
          const t0 = Date.now();
          await engine.signal({ id }, 'go', { from: nodeConfig.nodeId });
          sent.push({ id, t0 });
        }
        return sent;
      }
      case 'shutdown':
        await app.close();
        await dataSource.destroy();
        return null;
    }
  };

  process.on('message', (raw: unknown) => {
    const command = raw as NodeCommand;
    handle(command).then(
      (result) => {
        report({ type: 'reply', reqId: command.reqId, ok: true, result });
        if (command.cmd === 'shutdown') process.exit(0);
      },
      (err: unknown) =>
        report({
          type: 'reply',
          reqId: command.reqId,
          ok: false,
          error: err instanceof Error ? (err.stack ?? err.message) : String(err),
        }),
    );
  });
  process.on('disconnect', () => process.exit(1)); // the parent died: never linger
  report({
    type: 'ready',
    pid: process.pid,
    listening: engine.runtime.pokeTransport?.listening ?? null,
  });
}

main().catch((err: unknown) => {
  report({ type: 'fatal', error: err instanceof Error ? (err.stack ?? err.message) : String(err) });
  process.exit(1);
});
