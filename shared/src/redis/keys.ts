/**
 * Every Redis key and pub/sub channel name used between the planes is built here, and only here.
 *
 * A deployment (or a test run) picks a prefix (`REDIS_KEY_PREFIX`, default `rg:`), so several runs can
 * share one Redis without touching each other's keys. Per-workspace keys carry a `{workspaceId}` hash tag
 * so every multi-key script touches one Redis Cluster slot.
 */
export class RedisNames {
  constructor(readonly prefix: string) {}

  /** String: JSON `KeyRecord`, looked up by SHA-256 (hex) of the API key. */
  apiKey(keyHash: string): string {
    return `${this.prefix}key:${keyHash}`;
  }

  /** Pattern matching every `apiKey` key; for SCAN during a full re-publish. */
  apiKeyPattern(): string {
    return `${this.prefix}key:*`;
  }

  /** Hash: field = network slug, value = JSON `NetworkRecord`. */
  networks(): string {
    return `${this.prefix}networks`;
  }

  /** Hash: field = plan name, value = JSON `PlanRecord`. */
  plans(): string {
    return `${this.prefix}plans`;
  }

  /** String: JSON `WorkspaceRecord` (the workspace's current plan limits). */
  workspace(workspaceId: string): string {
    return `${this.prefix}ws:{${workspaceId}}`;
  }

  /** Pub/sub channel carrying `PlaneEvent` JSON messages from the control plane to data planes. */
  eventsChannel(): string {
    return `${this.prefix}events`;
  }

  /** String (ISO time): when the control plane last completed a full publish; readiness signal. */
  publishedAt(): string {
    return `${this.prefix}published-at`;
  }

  /**
   * String counter: login attempts for one email or one client IP in the current window (control plane
   * only). The subject is hashed so no address or email appears in Redis key names.
   */
  loginAttempts(scope: "email" | "ip", subjectHash: string): string {
    return `${this.prefix}login:${scope}:${subjectHash}`;
  }

  /** Prefix BullMQ puts in front of its queue keys (`<prefix>bull:<queue>:...`), inside the namespace. */
  bullPrefix(): string {
    return `${this.prefix}bull`;
  }
}
