// The README's migration: delegates to the DDL gen-durable ships.
import type { MigrationInterface, QueryRunner } from 'typeorm';
import { GenDurableMigration } from 'gen-durable';

export class SetupGenDurable1700000000000 implements MigrationInterface {
  up = (qr: QueryRunner) => GenDurableMigration.up(qr);
  down = (qr: QueryRunner) => GenDurableMigration.down(qr);
}
