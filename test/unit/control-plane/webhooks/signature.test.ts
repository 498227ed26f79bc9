import assert from "node:assert/strict";
import {
  generateWebhookSecret,
  signWebhook,
  verifyWebhook,
  webhookHeaders,
} from "../../../../control-plane/src/webhooks/signature";

describe("control-plane: webhook signatures (Standard Webhooks)", () => {
  it("matches the Standard Webhooks reference vector", () => {
    // From the Standard Webhooks specification's test suite.
    const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    const sig = signWebhook(secret, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, '{"test": 2432232314}');
    assert.equal(sig, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
  });

  it("secrets: whsec_ + base64 of 32 random bytes, all different", () => {
    const a = generateWebhookSecret();
    assert.match(a, /^whsec_[A-Za-z0-9+/]{43}=$/);
    assert.equal(Buffer.from(a.slice(6), "base64").length, 32);
    assert.notEqual(a, generateWebhookSecret());
  });

  it("verifies its own headers; refuses another secret, another body, a stale timestamp, a missing header", () => {
    const secret = generateWebhookSecret();
    const now = 1_700_000_000;
    const body = '{"id":"evt_1","type":"webhook.test"}';
    const h = webhookHeaders(secret, "evt_1", now, body);
    assert.equal(h["webhook-id"], "evt_1");
    assert.equal(h["webhook-timestamp"], String(now));
    const hs = { id: h["webhook-id"], timestamp: h["webhook-timestamp"], signature: h["webhook-signature"] };
    assert.ok(verifyWebhook(secret, hs, body, { nowSeconds: now }));
    assert.ok(verifyWebhook(secret, hs, body, { nowSeconds: now + 299 }));
    assert.ok(!verifyWebhook(secret, hs, body, { nowSeconds: now + 301 }), "outside the tolerance");
    assert.ok(!verifyWebhook(generateWebhookSecret(), hs, body, { nowSeconds: now }), "another secret");
    assert.ok(!verifyWebhook(secret, hs, `${body} `, { nowSeconds: now }), "another body");
    assert.ok(!verifyWebhook(secret, { ...hs, id: "evt_2" }, body, { nowSeconds: now }), "another id");
    assert.ok(!verifyWebhook(secret, { ...hs, signature: undefined }, body, { nowSeconds: now }));
    // Several signatures (a receiver accepts any): one good one among others passes.
    const several = { ...hs, signature: `v1,AAAA v2,xyz ${hs.signature}` };
    assert.ok(verifyWebhook(secret, several, body, { nowSeconds: now }));
  });
});
