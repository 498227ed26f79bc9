import { MigrationInterface, QueryRunner } from "typeorm";

/**
 * A weight for the events a WebSocket subscription pushes (`eth_subscription`, the method of an EVM
 * subscription notification): each event delivered costs its notification method's weight in compute
 * units, as a request object costs its method's (docs/compute-units.md#what-a-message-costs). Alchemy prices
 * events by size, 0.04 CU per byte, "about 40 compute units" for a typical event of about 1,000 bytes; the
 * seed charges that typical event's 40 per event. Substrate's notification methods take the default `*`
 * until the operator sets them. Added only where the platform table has no such entry.
 */
export class SubscriptionEventWeight1700000025500 implements MigrationInterface {
  name = "SubscriptionEventWeight1700000025500";

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      INSERT INTO method_costs (network_id, method, units)
      SELECT NULL, 'eth_subscription', 40
      WHERE NOT EXISTS (SELECT 1 FROM method_costs WHERE network_id IS NULL AND method = 'eth_subscription')`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DELETE FROM method_costs WHERE network_id IS NULL AND method = 'eth_subscription'`);
  }
}
