import { MigrationInterface, QueryRunner } from "typeorm";

/**
 * Every token expires (issue 24 §4). Personal tokens created without a lifetime get one: 365 days
 * after their creation (ACCESS_TOKEN_MAX_TTL_SECONDS' default), but never sooner than 30 days from
 * this migration, so automation using an old token has a month to replace it.
 */
export class TokenExpiry1700000024400 implements MigrationInterface {
  name = "TokenExpiry1700000024400";

  async up(q: QueryRunner): Promise<void> {
    await q.query(
      `UPDATE access_tokens
          SET expires_at = greatest(created_at + interval '365 days', now() + interval '30 days')
        WHERE expires_at IS NULL`,
    );
  }

  async down(): Promise<void> {
    // Lifetimes given to tokens are kept: which ones had none is not recorded.
  }
}
