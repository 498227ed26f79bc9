import { MigrationInterface, QueryRunner } from "typeorm";

/**
 * Request log (issue 17 §3): the parent of the day partitions (`request_log_pYYYYMMDD`, created ahead by
 * the worker, dropped past REQUEST_LOG_RETENTION_DAYS). The primary key includes `time` because a
 * partitioned table's unique keys must contain the partition key; it is also the ingestion's dedup key
 * (a stream entry delivered twice inserts nothing the second time).
 */
export class RequestLog1700000017300 implements MigrationInterface {
  name = "RequestLog1700000017300";

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE request_log (
        time timestamptz NOT NULL,
        request_id varchar(100) NOT NULL,
        item integer NOT NULL,
        workspace_id uuid NULL,
        app_id uuid NULL,
        network varchar(100) NOT NULL,
        transport varchar(8) NOT NULL,
        method varchar(100) NOT NULL,
        http_status smallint NOT NULL,
        category varchar(40) NOT NULL,
        reason varchar(60) NOT NULL,
        latency_ms real NOT NULL,
        client_ip varchar(60) NULL,
        PRIMARY KEY (time, request_id, item)
      ) PARTITION BY RANGE (time)`);
    // The console's listing: one workspace, newest first (the cursor is time, request_id, item).
    await q.query(`CREATE INDEX ix_request_log_workspace_time ON request_log (workspace_id, time DESC)`);
    // "Find this request": a pasted request id, across every partition.
    await q.query(`CREATE INDEX ix_request_log_request_id ON request_log (request_id)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE request_log`);
  }
}
