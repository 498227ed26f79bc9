import { MigrationInterface, QueryRunner } from "typeorm";

/**
 * The per-key concurrency caps as plan settings (`Plan.maxInFlightPerKey`, `Plan.maxHeavyInFlightPerKey`;
 * null = the data plane's MAX_IN_FLIGHT_PER_KEY / MAX_HEAVY_IN_FLIGHT_PER_KEY, as for a plan the operator
 * added). Seeded so the clients each plan is sold to fit (docs/limits.md#calls-in-flight):
 * - the cap is the plan's per-second limit held for one second (calls in flight = rate x latency, and a
 *   second covers a slow eth_call or receipt): free 50, growth 500, enterprise 5,000;
 * - growth's 500 also holds an indexer's 50 concurrent batches of 100 however many upstreams a network
 *   has: a batch holds one slot per upstream exchange, at most 10 for 100 elements (chunks of >= 10);
 * - heavy calls (each a scan on the node): free 4 (a developer's occasional eth_getLogs), growth 32 (an
 *   indexer's logs backfill), enterprise 128.
 * Only the seed's own rows are set: a plan the operator created keeps the data plane's defaults.
 */
export class PlanInFlightCaps1700000025300 implements MigrationInterface {
  name = "PlanInFlightCaps1700000025300";

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      ALTER TABLE plans
        ADD COLUMN max_in_flight_per_key integer NULL CHECK (max_in_flight_per_key > 0),
        ADD COLUMN max_heavy_in_flight_per_key integer NULL CHECK (max_heavy_in_flight_per_key > 0)`);
    await q.query(`
      UPDATE plans SET max_in_flight_per_key = v.total, max_heavy_in_flight_per_key = v.heavy
      FROM (VALUES ('free', 50, 4), ('growth', 500, 32), ('enterprise', 5000, 128)) AS v(name, total, heavy)
      WHERE plans.name = v.name`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(
      `ALTER TABLE plans DROP COLUMN max_heavy_in_flight_per_key, DROP COLUMN max_in_flight_per_key`,
    );
  }
}
