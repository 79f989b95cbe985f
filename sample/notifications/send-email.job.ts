import { Injectable, Logger } from '@nestjs/common';

import { DurableFsm, jobError } from '../../lib';

export interface EmailArgs {
  readonly customerId: string;
  readonly to: string;
  readonly subject: string;
}

/** Stands in for an email provider: logs the message; `to` without '@' is a hard failure. */
@Injectable()
export class Mailer {
  private readonly logger = new Logger('Mailer');
  sent = 0;

  send(args: EmailArgs): { ok: true; id: string } | { ok: false; reason: string } {
    if (!args.to.includes('@')) return { ok: false, reason: `invalid address ${args.to}` };
    this.sent += 1;
    this.logger.log(`sent "${args.subject}" to ${args.to}`);
    return { ok: true, id: `msg-${this.sent}` };
  }
}

/**
 * A job on the `email` queue. Inserted with `rateLimit: 'email'` (the provider allows a few
 * messages per second, docs/design.md §15) and `concurrencyKey: ['customer', id]` (one email per
 * customer at a time, docs/design.md §14), so bursts are smoothed and a customer's mails never overlap.
 */
@DurableFsm({ name: 'send-email', queue: 'email', maxAttempts: 5 })
export class SendEmailJob {
  constructor(private readonly mailer: Mailer) {}

  perform(args: EmailArgs) {
    const sent = this.mailer.send(args);
    return sent.ok ? { messageId: sent.id } : jobError(sent.reason);
  }
}
