import { Module } from '@nestjs/common';

import { AssistantController } from './assistant.controller';
import { AssistantFsm } from './assistant.fsm';
import { FakeModel } from './fake-model';

/**
 * The assistant flow: an FSM that streams its answer and asks for approval through a signed
 * callback URL, the fake model it injects, and the page and API. It needs the engine's
 * `callbacks` option and the streams and callbacks modules, which AppModule mounts.
 */
@Module({
  controllers: [AssistantController],
  providers: [AssistantFsm, FakeModel],
})
export class AssistantModule {}
