import { Module } from '@nestjs/common';

import { NightlyReportJob } from './nightly-report.job';
import { ScheduleLogger } from './schedule-logger';

/** The nightly report job and the boot line that shows the schedules. */
@Module({ providers: [NightlyReportJob, ScheduleLogger] })
export class ReportsModule {}
