import {
  BadRequestException,
  Body,
  Controller,
  Get,
  Header,
  HttpCode,
  NotFoundException,
  Param,
  Post,
} from '@nestjs/common';

import { EngineService } from '../../lib';
import { assistantPage } from './assistant-page';
import { AssistantFsm } from './assistant.fsm';

/** Where AppModule mounts GenDurableStreamsModule (the page reads the stream there). */
export const SAMPLE_STREAMS_PATH = 'durable/streams';

const INSTANCE_ID = /^[A-Za-z0-9_-]{1,64}$/;
const DEFAULT_PROMPT = 'Why would I want a durable engine?';

/**
 * The assistant's HTTP API:
 * - `POST /assistant` `{ prompt? }` starts an assistant → 201 `{ id, page }`;
 * - `GET /assistant/:id` the page that follows its answer and approves it (sample/assistant/assistant-page.ts);
 * - `GET /assistant/:id/status` → `{ id, status, step, result }`.
 */
@Controller('assistant')
export class AssistantController {
  constructor(private readonly engine: EngineService) {}

  @Post()
  @HttpCode(201)
  async start(@Body() body: unknown): Promise<{ id: string; page: string }> {
    const { prompt = DEFAULT_PROMPT } = (
      typeof body === 'object' && body !== null ? body : {}
    ) as Record<string, unknown>;
    if (typeof prompt !== 'string' || prompt.length === 0 || prompt.length > 2000) {
      throw new BadRequestException('prompt must be a string of 1 to 2000 characters');
    }
    const id = await this.engine.insert(AssistantFsm, { state: { prompt } });
    return { id, page: `/assistant/${id}` };
  }

  @Get(':id')
  @Header('content-type', 'text/html; charset=utf-8')
  @Header('cache-control', 'no-store')
  async page(@Param('id') id: string): Promise<string> {
    await this.instance(id);
    return assistantPage(id, SAMPLE_STREAMS_PATH);
  }

  @Get(':id/status')
  async status(@Param('id') id: string): Promise<Record<string, unknown>> {
    const instance = await this.instance(id);
    return {
      id: instance.id,
      status: instance.status,
      step: instance.step,
      result: instance.result,
    };
  }

  private async instance(id: string) {
    if (!INSTANCE_ID.test(id)) throw new BadRequestException('malformed assistant id');
    const instance = await this.engine.get(id);
    if (!instance || instance.fsm !== 'assistant') {
      throw new NotFoundException(`no assistant ${id}`);
    }
    return instance;
  }
}
