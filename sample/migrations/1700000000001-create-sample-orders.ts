import type { MigrationInterface, QueryRunner } from 'typeorm';

/** The sample's own table: paid orders, written by the checkout's transactional `paid` step. */
export const SAMPLE_ORDERS_DDL = `CREATE TABLE IF NOT EXISTS sample_orders (
  order_id text PRIMARY KEY,
  total integer NOT NULL,
  reference text NOT NULL,
  paid_at timestamptz NOT NULL DEFAULT now())`;

/** The host's own migration, beside gen-durable's: the table of paid orders. */
export class CreateSampleOrders1700000000001 implements MigrationInterface {
  name = 'CreateSampleOrders1700000000001';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(SAMPLE_ORDERS_DDL);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE IF EXISTS sample_orders`);
  }
}
