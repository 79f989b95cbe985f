// A job whose first attempt fails: the engine retries it after `backoff`. A bounce address
// fails every attempt: the instance ends failed after three.
import { Injectable } from '@nestjs/common';
import { DurableFsm, type StepContext } from 'gen-durable';

@Injectable()
export class Mailer {
  readonly sent: string[] = [];
  send(to: string, attempt: number): void {
    if (attempt === 0) throw new Error('mail server busy');
    if (to.startsWith('bounce@')) throw new Error(`${to} bounced`);
    this.sent.push(to);
  }
}

@DurableFsm({ name: 'send-receipt', maxAttempts: 3 })
export class SendReceiptJob {
  constructor(private readonly mailer: Mailer) {}

  perform(args: { to: string }, ctx: StepContext) {
    this.mailer.send(args.to, ctx.attempt);
    return { to: args.to, attempt: ctx.attempt };
  }

  backoff() {
    return 50;
  }
}
