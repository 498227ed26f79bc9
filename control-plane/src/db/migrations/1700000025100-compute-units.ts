import { MigrationInterface, QueryRunner } from "typeorm";

/**
 * Compute units (issue 28 §1, docs/compute-units.md):
 *
 * - `method_costs`: method weights. `network_id` NULL rows are the platform default table; a network's
 *   rows override it for that network. Method `*` is the weight of any method not listed.
 * - Plan limits in compute units (`plans.compute_units_per_second`, `daily_compute_unit_limit`,
 *   `monthly_compute_unit_limit`); NULL = no limit in that unit, which the seeded plans keep: they go on
 *   counting requests only.
 * - An app's own per-second cap in compute units (`app_access_rules.compute_units_per_second`).
 *
 * The platform default table is Alchemy's published compute-unit costs per method ("Compute Unit Costs",
 * docs.alchemy.com/reference/compute-unit-costs, the per-method table in force before its 2025 revision,
 * as mirrored by other providers' CU tables): each weight was derived there from the method's average
 * duration across their fleet, which is the property an operator wants from a default. Methods Alchemy
 * does not list take the default weight of 20 (about the table's median of the common reads); the debug_*
 * tracers other than debug_traceTransaction (309) are given its weight. Substrate
 * methods are not in it and take the default until the operator sets them.
 */
const PLATFORM_DEFAULTS: ReadonlyArray<readonly [string, number]> = [
  ["*", 20],
  ["eth_chainId", 0],
  ["net_version", 0],
  ["net_listening", 0],
  ["eth_syncing", 0],
  ["eth_protocolVersion", 0],
  ["eth_accounts", 10],
  ["eth_blockNumber", 10],
  ["eth_feeHistory", 10],
  ["eth_maxPriorityFeePerGas", 10],
  ["eth_createAccessList", 10],
  ["eth_subscribe", 10],
  ["eth_unsubscribe", 10],
  ["eth_uninstallFilter", 10],
  ["eth_getTransactionReceipt", 15],
  ["eth_getTransactionByBlockHashAndIndex", 15],
  ["eth_getTransactionByBlockNumberAndIndex", 15],
  ["eth_getUncleByBlockHashAndIndex", 15],
  ["eth_getUncleByBlockNumberAndIndex", 15],
  ["eth_getUncleCountByBlockHash", 15],
  ["eth_getUncleCountByBlockNumber", 15],
  ["web3_clientVersion", 15],
  ["web3_sha3", 15],
  ["eth_getBlockByNumber", 16],
  ["eth_getStorageAt", 17],
  ["eth_getTransactionByHash", 17],
  ["trace_get", 17],
  ["eth_gasPrice", 19],
  ["eth_getBalance", 19],
  ["eth_getCode", 19],
  ["eth_getFilterChanges", 20],
  ["eth_newBlockFilter", 20],
  ["eth_newFilter", 20],
  ["eth_newPendingTransactionFilter", 20],
  ["eth_getBlockTransactionCountByHash", 20],
  ["eth_getBlockTransactionCountByNumber", 20],
  ["eth_getProof", 21],
  ["eth_getBlockByHash", 21],
  ["trace_block", 24],
  ["eth_getTransactionCount", 26],
  ["eth_call", 26],
  ["trace_transaction", 26],
  ["eth_getFilterLogs", 75],
  ["eth_getLogs", 75],
  ["trace_call", 75],
  ["trace_callMany", 75],
  ["trace_rawTransaction", 75],
  ["trace_filter", 75],
  ["eth_estimateGas", 87],
  ["debug_traceCall", 309],
  ["debug_traceTransaction", 309],
  ["debug_traceBlockByHash", 309],
  ["debug_traceBlockByNumber", 309],
  ["eth_sendRawTransaction", 250],
  ["eth_getBlockReceipts", 500],
  ["trace_replayTransaction", 2983],
  ["trace_replayBlockTransactions", 2983],
];

export class ComputeUnits1700000025100 implements MigrationInterface {
  name = "ComputeUnits1700000025100";

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE method_costs (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        network_id uuid NULL REFERENCES networks(id) ON DELETE CASCADE,
        method text NOT NULL CHECK (char_length(method) BETWEEN 1 AND 128),
        units integer NOT NULL CHECK (units >= 0),
        updated_at timestamptz NOT NULL DEFAULT now()
      )`);
    // One weight per method in the platform table and per network (NULL network_id compared as one value).
    await q.query(`
      CREATE UNIQUE INDEX uq_method_costs_scope_method
        ON method_costs (COALESCE(network_id, '00000000-0000-0000-0000-000000000000'::uuid), method)`);
    for (const [method, units] of PLATFORM_DEFAULTS) {
      await q.query(`INSERT INTO method_costs (network_id, method, units) VALUES (NULL, $1, $2)`, [
        method,
        units,
      ]);
    }
    await q.query(`
      ALTER TABLE plans
        ADD COLUMN compute_units_per_second integer NULL CHECK (compute_units_per_second > 0),
        ADD COLUMN daily_compute_unit_limit bigint NULL CHECK (daily_compute_unit_limit > 0),
        ADD COLUMN monthly_compute_unit_limit bigint NULL CHECK (monthly_compute_unit_limit > 0)`);
    await q.query(`
      ALTER TABLE app_access_rules
        ADD COLUMN compute_units_per_second integer NULL CHECK (compute_units_per_second > 0)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE app_access_rules DROP COLUMN compute_units_per_second`);
    await q.query(`
      ALTER TABLE plans
        DROP COLUMN compute_units_per_second,
        DROP COLUMN daily_compute_unit_limit,
        DROP COLUMN monthly_compute_unit_limit`);
    await q.query(`DROP TABLE IF EXISTS method_costs`);
  }
}
