import { Controller, Get } from '@nestjs/common';

/** `GET /`: the sample is up and its database migrated (boot fails otherwise). */
@Controller()
export class AppController {
  @Get()
  status(): { name: string; ok: boolean } {
    return { name: 'gen-durable sample', ok: true };
  }
}
