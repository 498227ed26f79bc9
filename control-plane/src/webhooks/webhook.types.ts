import { registerEnumType } from "type-graphql";

/**
 * Events an endpoint can subscribe to. The GraphQL enum names the keys (QUOTA_THRESHOLD); the values are
 * the wire names in the payload's `type` and in `webhook_endpoints.event_types`.
 */
export enum WebhookEventType {
  QUOTA_THRESHOLD = "quota.threshold",
  NODE_STATUS = "node.status",
  VALIDATOR_STATUS = "validator.status",
  KEY_REGENERATED = "key.regenerated",
  USAGE_DAILY = "usage.daily",
}
registerEnumType(WebhookEventType, {
  name: "WebhookEventType",
  valuesConfig: {
    QUOTA_THRESHOLD: {
      description:
        "quota.threshold: today's usage reached 80% or 100% of the daily limit (in requests, or in compute units for plans with a daily compute-unit limit)",
    },
    NODE_STATUS: {
      description: "node.status: a dedicated node left SYNCED, entered ERROR, or became SYNCED",
    },
    VALIDATOR_STATUS: { description: "validator.status: a validator node's status changed" },
    KEY_REGENERATED: { description: "key.regenerated: an app's or a dedicated node's API key was replaced" },
    USAGE_DAILY: {
      description:
        "usage.daily: the previous UTC day's usage totals, once per workspace and day (docs/billing.md)",
    },
  },
});

export const WEBHOOK_EVENT_TYPES: readonly WebhookEventType[] = Object.values(WebhookEventType);

/** Type of the event `sendTestWebhook` sends; not subscribable, delivered to the one endpoint named. */
export const WEBHOOK_TEST_EVENT = "webhook.test";

export enum WebhookDeliveryStatus {
  /** Queued, or failed with attempts left (`nextAttemptAt`). */
  PENDING = "PENDING",
  /** An attempt got a 2xx answer. */
  SUCCEEDED = "SUCCEEDED",
  /** Attempts exhausted, or refused for good (address not allowed, endpoint disabled or unreadable secret). */
  FAILED = "FAILED",
}
registerEnumType(WebhookDeliveryStatus, { name: "WebhookDeliveryStatus" });

/** The two thresholds of `quota.threshold`, in percent of the plan's daily limit. */
export const QUOTA_THRESHOLDS_PERCENT = [80, 100] as const;

/**
 * What a `quota.threshold` event counts: request objects against the daily request limit, or compute
 * units against the daily compute-unit limit (only for plans that set one).
 */
export type QuotaUnit = "requests" | "computeUnits";

/** `data` of each event type (docs/webhooks.md documents them). */
export interface WebhookEventData {
  [WebhookEventType.QUOTA_THRESHOLD]: {
    /** 80 or 100. */
    thresholdPercent: number;
    /** The unit of `used` and `limit`. */
    unit: QuotaUnit;
    /** UTC day, `YYYY-MM-DD`. */
    day: string;
    /** Response units (or compute units) counted today when the check ran. */
    used: number;
    /** The plan's daily limit in `unit`. */
    limit: number;
    /** ISO time of the next 00:00 UTC, when the count resets. */
    resetsAt: string;
  };
  [WebhookEventType.NODE_STATUS]: {
    nodeId: string;
    displayName: string;
    network: string;
    previousStatus: string;
    status: string;
    reason: string | null;
  };
  [WebhookEventType.VALIDATOR_STATUS]: {
    nodeId: string;
    displayName: string;
    stash: string;
    /** null on the first status seen after the stash was set. */
    previousStatus: string | null;
    status: string;
  };
  [WebhookEventType.KEY_REGENERATED]:
    | { kind: "app"; appId: string; appName: string; previousKeyExpiresAt: string | null }
    | { kind: "node"; nodeId: string; displayName: string; previousKeyExpiresAt: null };
  [WebhookEventType.USAGE_DAILY]: UsageDailyData;
}

/** Amounts of a `usage.daily` total (see control-plane/src/billing/rollup-sums.ts). */
export interface UsageDailyAmounts {
  /** Request objects answered, refusals included. */
  requests: number;
  computeUnits: number;
  /** Of those: refused with 429 (Too Many Requests). */
  refusedRequests: number;
  refusedComputeUnits: number;
}

/** `data` of `usage.daily`: one workspace's totals for one UTC day. */
export interface UsageDailyData extends UsageDailyAmounts {
  /** UTC day, `YYYY-MM-DD`. */
  day: string;
  /** 00:00 UTC of the day, and of the next (exclusive). */
  from: string;
  to: string;
  /** Per app (appId null: dedicated-node traffic), each per network; largest first. */
  apps: (UsageDailyAmounts & {
    appId: string | null;
    appName: string | null;
    networks: (UsageDailyAmounts & { network: string })[];
  })[];
  /** Per network, all apps together. */
  networks: (UsageDailyAmounts & { network: string })[];
}

/**
 * Whether a dedicated node's status change is announced as `node.status`: it left SYNCED (fell behind,
 * restarted, stopped, deleted), entered ERROR, or became SYNCED (first sync or back after any of those).
 */
export function isAnnouncedNodeTransition(previous: string, next: string): boolean {
  if (previous === next) return false;
  return previous === "SYNCED" || next === "SYNCED" || next === "ERROR";
}
