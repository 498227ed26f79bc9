import assert from "node:assert/strict";
import {
  newWebhookEventId,
  nextAttemptDelayMs,
  webhookBody,
} from "../../../../control-plane/src/webhooks/webhook.queue";
import { isAnnouncedNodeTransition } from "../../../../control-plane/src/webhooks/webhook.types";

describe("control-plane: webhook rules", () => {
  it("node.status is announced when a node leaves SYNCED, enters ERROR or becomes SYNCED", () => {
    const yes: [string, string][] = [
      ["SYNCING", "SYNCED"],
      ["PROVISIONING", "SYNCED"],
      ["SYNCED", "SYNCING"],
      ["SYNCED", "PROVISIONING"],
      ["SYNCED", "STOPPED"],
      ["SYNCED", "DELETING"],
      ["PROVISIONING", "ERROR"],
      ["SYNCING", "ERROR"],
    ];
    const no: [string, string][] = [
      ["PENDING", "PROVISIONING"],
      ["PROVISIONING", "SYNCING"],
      ["STOPPED", "PROVISIONING"],
      ["ERROR", "PROVISIONING"],
      ["SYNCING", "STOPPED"],
      ["SYNCED", "SYNCED"],
      ["ERROR", "ERROR"],
    ];
    for (const [a, b] of yes) assert.equal(isAnnouncedNodeTransition(a, b), true, `${a} -> ${b}`);
    for (const [a, b] of no) assert.equal(isAnnouncedNodeTransition(a, b), false, `${a} -> ${b}`);
  });

  it("backoff doubles from the base after each failed attempt", () => {
    assert.deepEqual(
      [1, 2, 3, 4, 5].map((n) => nextAttemptDelayMs(60_000, n)),
      [60_000, 120_000, 240_000, 480_000, 960_000],
    );
  });

  it("event ids and bodies", () => {
    const id = newWebhookEventId();
    assert.match(id, /^evt_[0-9a-f]{32}$/);
    assert.notEqual(id, newWebhookEventId());
    const body = webhookBody({
      id,
      type: "key.regenerated",
      workspaceId: "w",
      occurredAt: "2025-01-01T00:00:00.000Z",
      data: { kind: "app" },
    });
    assert.deepEqual(JSON.parse(body), {
      id,
      type: "key.regenerated",
      timestamp: "2025-01-01T00:00:00.000Z",
      workspaceId: "w",
      data: { kind: "app" },
    });
  });
});
