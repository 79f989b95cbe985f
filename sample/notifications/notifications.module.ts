import { Module } from '@nestjs/common';

import { Mailer, SendEmailJob } from './send-email.job';

/** The email job and its (fake) provider. */
@Module({ providers: [Mailer, SendEmailJob], exports: [Mailer] })
export class NotificationsModule {}
