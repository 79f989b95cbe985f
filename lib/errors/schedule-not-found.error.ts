import { GenDurableError } from './gen-durable.error';

/** `engine.schedules.remove/pause/resume/trigger` named a schedule that is not stored. Nothing changed. */
export class ScheduleNotFoundError extends GenDurableError {
  readonly code = 'GD_SCHEDULE_NOT_FOUND';
  constructor(readonly schedule: string) {
    super(
      `no schedule named "${schedule}" is stored: engine.schedules.list() shows the stored ones`,
    );
  }
}
