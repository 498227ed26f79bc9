import { MigrationInterface, QueryRunner } from "typeorm";

/**
 * Upstream capabilities (issue 14 §2, docs/contracts.md#upstream-capabilities): what the operator says
 * about each upstream's state history (AUTO = the data plane probes it), the method families it serves
 * (NULL = none declared) and its requests-per-second budget (NULL = none). Existing upstreams: AUTO, no
 * families, no budget, which routes exactly as before until a probe finds a pruned node.
 */
export class UpstreamCapabilities1700000006000 implements MigrationInterface {
  name = "UpstreamCapabilities1700000006000";

  async up(q: QueryRunner): Promise<void> {
    await q.query(
      "ALTER TABLE upstreams ADD COLUMN archive_mode text NOT NULL DEFAULT 'AUTO' CHECK (archive_mode IN ('AUTO', 'ARCHIVE', 'PRUNED'))",
    );
    await q.query(
      "ALTER TABLE upstreams ADD COLUMN method_families text[] CHECK (method_families <@ ARRAY['debug', 'trace']::text[])",
    );
    await q.query(
      "ALTER TABLE upstreams ADD COLUMN max_requests_per_second integer CHECK (max_requests_per_second > 0)",
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query("ALTER TABLE upstreams DROP COLUMN max_requests_per_second");
    await q.query("ALTER TABLE upstreams DROP COLUMN method_families");
    await q.query("ALTER TABLE upstreams DROP COLUMN archive_mode");
  }
}
