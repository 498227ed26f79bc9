import assert from "node:assert/strict";
import { Redis } from "ioredis";
import { hashApiKey } from "../../../shared/src/crypto/api-key";
import { KeyRecordSchema, PlaneEvent } from "../../../shared/src/redis/records";
import { planeEventsBarrier } from "../../helpers/plane-events";
import { TEST_REDIS_URL } from "../../helpers/redis";
import { code, createApp, Harness, startHarness } from "./harness";

const ADD = `mutation($a: ID!, $i: AllowlistEntryInput!) { addAllowlistEntry(appId: $a, input: $i) { id kind value createdAt } }`;
const REMOVE = `mutation($a: ID!, $e: ID!) { removeAllowlistEntry(appId: $a, entryId: $e) { id } }`;

describe("control-plane: allowlists", () => {
  let h: Harness;
  let user: { token: string };
  before(async () => {
    h = await startHarness();
    user = await h.signUp();
  });
  after(async () => {
    await h?.close();
  });

  it("adds normalised entries, publishes them in the key record with a key.upsert event, removes them", async () => {
    const app = await createApp(h, user.token);
    const sub = new Redis(TEST_REDIS_URL);
    const events: PlaneEvent[] = [];
    await sub.subscribe(h.names.eventsChannel());
    sub.on("message", (_c, m) => events.push(JSON.parse(m)));
    try {
      const o = await h.ok(
        ADD,
        { a: app.id, i: { kind: "ORIGIN", value: "HTTPS://App.Example.com/" } },
        user.token,
      );
      assert.equal(o.addAllowlistEntry.value, "https://app.example.com");
      await h.ok(ADD, { a: app.id, i: { kind: "ORIGIN", value: "*.example.org" } }, user.token);
      await h.ok(ADD, { a: app.id, i: { kind: "IP", value: "203.0.113.7" } }, user.token);
      await h.ok(ADD, { a: app.id, i: { kind: "IP", value: "10.9.8.7/8" } }, user.token);
      const v6 = await h.ok(ADD, { a: app.id, i: { kind: "IP", value: "2001:DB8::/32" } }, user.token);
      assert.equal(v6.addAllowlistEntry.value, "2001:db8::/32");
      const rec = KeyRecordSchema.parse(
        JSON.parse((await h.redis.get(h.names.apiKey(hashApiKey(app.apiKey))))!),
      );
      assert.deepEqual(rec.allowlist, {
        origins: ["https://app.example.com", "*.example.org"],
        ips: ["203.0.113.7", "10.0.0.0/8", "2001:db8::/32"],
      });
      await planeEventsBarrier(h.redis, h.names.eventsChannel(), events);
      assert.ok(
        events.filter((e) => e.type === "key.upsert" && e.keyHash === hashApiKey(app.apiKey)).length >= 5,
      );

      const list = await h.ok(
        `query($id: ID!) { app(id: $id) { allowlist { id kind value } } }`,
        { id: app.id },
        user.token,
      );
      assert.equal(list.app.allowlist.length, 5);
      await h.ok(REMOVE, { a: app.id, e: o.addAllowlistEntry.id }, user.token);
      const rec2 = KeyRecordSchema.parse(
        JSON.parse((await h.redis.get(h.names.apiKey(hashApiKey(app.apiKey))))!),
      );
      assert.deepEqual(rec2.allowlist.origins, ["*.example.org"]);
      assert.equal(
        code(await h.gql(REMOVE, { a: app.id, e: o.addAllowlistEntry.id }, user.token)),
        "NOT_FOUND",
      );
    } finally {
      sub.disconnect();
    }
  });

  it("refuses invalid values and duplicates (also duplicates after normalisation) with a field error", async () => {
    const app = await createApp(h, user.token);
    for (const [kind, value] of [
      ["ORIGIN", "https://x.example.com/path"],
      ["ORIGIN", "not an origin"],
      ["IP", "300.1.1.1"],
      ["IP", "1.2.3.4/40"],
      ["IP", "x".repeat(300)],
    ]) {
      const r = await h.gql(ADD, { a: app.id, i: { kind, value } }, user.token);
      assert.equal(code(r), "BAD_USER_INPUT", `${kind} ${value}`);
      assert.equal(r.errors![0]!.extensions!.field, "value");
    }
    await h.ok(ADD, { a: app.id, i: { kind: "IP", value: "2001:db8::1" } }, user.token);
    const dup = await h.gql(ADD, { a: app.id, i: { kind: "IP", value: "2001:DB8:0::1" } }, user.token);
    assert.equal(code(dup), "BAD_USER_INPUT");
    assert.equal(dup.errors![0]!.extensions!.field, "value");
    const list = await h.ok(
      `query($id: ID!) { app(id: $id) { allowlist { value } } }`,
      { id: app.id },
      user.token,
    );
    assert.deepEqual(list.app.allowlist, [{ value: "2001:db8::1" }]);
  });
});
