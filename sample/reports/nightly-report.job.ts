import { Logger } from '@nestjs/common';

import { type CronFireInfo, DurableCron, DurableFsm, EngineService } from '../../lib';

/**
 * A nightly job (docs/cron.md): at 03:00 Berlin time one node fires it, exactly once however
 * many run the sample, and it reports the orders paid and the emails sent in the 24 hours
 * before the occurrence it stands for (`state._cron.at`). A night missed while every node was
 * down is fired once on restart, with `_cron.missed` saying how many nights it covers.
 */
@DurableCron('0 3 * * *', { name: 'nightly-report', tz: 'Europe/Berlin', missed: 'once' })
@DurableFsm({ name: 'nightly-report', queue: 'default' })
export class NightlyReportJob {
  private readonly logger = new Logger('NightlyReport');

  constructor(private readonly engine: EngineService) {}

  async perform(args: { _cron: CronFireInfo }) {
    const until = new Date(args._cron.at);
    const since = new Date(until.getTime() - 86_400_000);
    const window = { updatedAfter: since, updatedBefore: until, status: 'done' as const };
    const orders = (await this.engine.count({ ...window, fsm: 'checkout' })).count;
    const emails = (await this.engine.count({ ...window, fsm: 'send-email' })).count;
    const missed = args._cron.missed > 0 ? ` (covers ${args._cron.missed} missed nights)` : '';
    this.logger.log(
      `report for ${args._cron.at}: ${orders} orders paid, ${emails} emails sent${missed}`,
    );
    return { at: args._cron.at, orders, emails };
  }
}
