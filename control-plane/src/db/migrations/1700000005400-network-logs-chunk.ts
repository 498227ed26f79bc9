import { MigrationInterface, QueryRunner } from "typeorm";

/**
 * Per-network eth_getLogs chunk size (issue 14 §4): ranges longer than this many blocks are split into
 * parallel sub-calls by the data plane. 0 = never split; existing networks get the default, the same as
 * shared/src/redis/records.ts DEFAULT_LOGS_CHUNK_BLOCKS.
 */
export class NetworkLogsChunk1700000005400 implements MigrationInterface {
  name = "NetworkLogsChunk1700000005400";

  async up(q: QueryRunner): Promise<void> {
    await q.query(
      "ALTER TABLE networks ADD COLUMN logs_chunk_blocks integer NOT NULL DEFAULT 2000 CHECK (logs_chunk_blocks >= 0)",
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query("ALTER TABLE networks DROP COLUMN logs_chunk_blocks");
  }
}
